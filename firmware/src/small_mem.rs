//! Byte-loop `memcpy` and `memmove` for the Cortex-M0 program, in place of
//! compiler-builtins' word-unrolled ones (1,904 bytes of thumbv6m code: a program that
//! must fit 64 KiB of flash spends 30 bytes here instead). The engine copies little
//! (a head's weights once, a tensor now and then when the arena compacts), so the
//! slower loop costs the program almost nothing; [`self_check`] proves them at boot.
//! Likewise a word loop for `__aeabi_memclr4` (zeroing arena spans: 24 bytes instead
//! of 158).
//!
//! Included only by `finetune_m0` (`#[path]`), so the M4F programs keep the fast ones.
//! The AEABI entry points: `r0` destination, `r1` source, `r2` length; `r4` is saved.

core::arch::global_asm!(
    ".section .text.torchlet_small_mem,\"ax\",%progbits",
    ".global __aeabi_memcpy",
    ".global __aeabi_memcpy4",
    ".thumb_func",
    "__aeabi_memcpy:",
    "__aeabi_memcpy4:",
    "    push {{r4, lr}}",
    "    movs r3, #0",
    "1:  cmp r3, r2",
    "    beq 2f",
    "    ldrb r4, [r1, r3]",
    "    strb r4, [r0, r3]",
    "    adds r3, #1",
    "    b 1b",
    "2:  pop {{r4, pc}}",
    // Forward when the destination is below the source (or equal), else backward:
    // correct for overlapping ranges either way.
    ".global __aeabi_memmove",
    ".global __aeabi_memmove4",
    ".thumb_func",
    "__aeabi_memmove:",
    "__aeabi_memmove4:",
    "    cmp r0, r1",
    "    bls __aeabi_memcpy",
    "    push {{r4, lr}}",
    "3:  cmp r2, #0",
    "    beq 4f",
    "    subs r2, #1",
    "    ldrb r4, [r1, r2]",
    "    strb r4, [r0, r2]",
    "    b 3b",
    "4:  pop {{r4, pc}}",
    // Zeroing a word-aligned `r0` for `r1` bytes: whole words, then the odd bytes.
    ".global __aeabi_memclr4",
    ".thumb_func",
    "__aeabi_memclr4:",
    "    movs r2, #0",
    "5:  subs r1, #4",
    "    blo 6f",
    "    stm r0!, {{r2}}",
    "    b 5b",
    "6:  adds r1, #4",
    "    beq 8f",
    "7:  strb r2, [r0]",
    "    adds r0, #1",
    "    subs r1, #1",
    "    bne 7b",
    "8:  bx lr",
);

/// Copies with both overlaps and odd lengths, and zeroes an odd length, through the
/// routines above and checks every byte; `false` means they are broken (the program
/// then fails, never trusts them).
#[inline(never)]
pub fn self_check() -> bool {
    let mut buf = [0u8; 24];
    for (i, b) in buf.iter_mut().enumerate() {
        *b = i as u8;
    }
    let n = core::hint::black_box(13usize);
    let p = buf.as_mut_ptr();
    // SAFETY: every range lies inside `buf` (24 bytes): 0..13 -> 5..18 and 6..18 -> 2..14
    // overlap (memmove), 0..12 -> 12..24 do not (memcpy); 13 bytes lie inside `w` (16).
    unsafe {
        core::ptr::copy(p, p.add(5), n); // destination above: copied backward
        let backward_ok = (0..n).all(|i| buf[5 + i] == i as u8);
        core::ptr::copy(p.add(6), p.add(2), n - 1); // destination below: copied forward
        let forward_ok = (0..n - 1).all(|i| buf[2 + i] == i as u8 + 1);
        core::ptr::copy_nonoverlapping(p, p.add(12), n - 1);
        let copy_ok = (0..n - 1).all(|i| buf[12 + i] == buf[i]);
        // memclr4: three words and one byte of four words (little-endian).
        let mut w = [u32::MAX; 4];
        core::ptr::write_bytes(w.as_mut_ptr().cast::<u8>(), 0, n);
        backward_ok && forward_ok && copy_ok && w == [0, 0, 0, 0xFFFF_FF00]
    }
}
