//! A/B checkpoints of `torchlet::io` on an in-memory NOR flash that loses power after a
//! chosen number of byte writes (and erase pages): for every possible cut, the last
//! complete save must still load, bit for bit.

use embedded_storage::nor_flash::{ErrorType, NorFlash, NorFlashErrorKind, ReadNorFlash};
use torchlet::init::Rng;
use torchlet::io::{AbCheckpoint, SlotInfo};
use torchlet::nn::digits_fcn;
use torchlet::{Error, Graph};

const TAPE: usize = 32;
const ERASE: usize = 1024;

/// NOR flash in RAM: writes can only clear bits, erases set whole pages to 0xFF. With
/// a budget, power fails once that many bytes were written (or pages erased): the
/// byte in flight is lost, an erase in flight leaves its page half erased, and every
/// later access fails until [`CutFlash::power_on`].
#[derive(Clone)]
struct CutFlash {
    mem: Vec<u8>,
    budget: Option<usize>,
    dead: bool,
    used: usize,
}

impl CutFlash {
    fn new(bytes: usize) -> Self {
        CutFlash {
            mem: vec![0xFF; bytes],
            budget: None,
            dead: false,
            used: 0,
        }
    }

    fn power_on(&mut self) {
        self.budget = None;
        self.dead = false;
    }

    /// Spends one unit of the budget; `false` means the power just failed.
    fn tick(&mut self) -> bool {
        if self.dead {
            return false;
        }
        if let Some(b) = &mut self.budget {
            if *b == 0 {
                self.dead = true;
                return false;
            }
            *b -= 1;
        }
        self.used += 1;
        true
    }
}

impl ErrorType for CutFlash {
    type Error = NorFlashErrorKind;
}

impl ReadNorFlash for CutFlash {
    const READ_SIZE: usize = 1;
    fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), Self::Error> {
        let o = offset as usize;
        if self.dead {
            return Err(NorFlashErrorKind::Other);
        }
        let src = self
            .mem
            .get(o..o + bytes.len())
            .ok_or(NorFlashErrorKind::OutOfBounds)?;
        bytes.copy_from_slice(src);
        Ok(())
    }
    fn capacity(&self) -> usize {
        self.mem.len()
    }
}

impl NorFlash for CutFlash {
    const WRITE_SIZE: usize = 4;
    const ERASE_SIZE: usize = ERASE;
    fn erase(&mut self, from: u32, to: u32) -> Result<(), Self::Error> {
        let (from, to) = (from as usize, to as usize);
        if !from.is_multiple_of(ERASE) || !to.is_multiple_of(ERASE) || to > self.mem.len() || from > to {
            return Err(NorFlashErrorKind::NotAligned);
        }
        for page in (from..to).step_by(ERASE) {
            if !self.tick() {
                self.mem[page..page + ERASE / 2].fill(0xFF);
                return Err(NorFlashErrorKind::Other);
            }
            self.mem[page..page + ERASE].fill(0xFF);
        }
        Ok(())
    }
    fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), Self::Error> {
        let o = offset as usize;
        if !o.is_multiple_of(4) || !bytes.len().is_multiple_of(4) || o + bytes.len() > self.mem.len() {
            return Err(NorFlashErrorKind::NotAligned);
        }
        for (i, &b) in bytes.iter().enumerate() {
            if !self.tick() {
                return Err(NorFlashErrorKind::Other);
            }
            self.mem[o + i] &= b;
        }
        Ok(())
    }
}

fn params(g: &Graph<'_, f32, TAPE>) -> Vec<Vec<f32>> {
    (0..g.num_params())
        .map(|i| g.data(g.param_handle(i).unwrap()).unwrap().to_vec())
        .collect()
}

/// Builds a model's parameters, initialised from a seed.
type Build = fn(&mut Graph<'_, f32, TAPE>, u64);

/// W1, 6,218 parameters (25,036 bytes saved).
fn w1(g: &mut Graph<'_, f32, TAPE>, seed: u64) {
    digits_fcn(g, &mut Rng::new(seed)).unwrap();
}

/// A tiny conv + linear model, 73 parameters (384 bytes saved).
fn tiny(g: &mut Graph<'_, f32, TAPE>, seed: u64) {
    let mut rng = Rng::new(seed);
    for dims in [&[3, 2, 3, 3][..], &[3], &[4, 3], &[4]] {
        let t = g.param(dims).unwrap();
        for v in g.param_data_mut(t).unwrap() {
            *v = rng.next_f32() - 0.5;
        }
    }
}

fn values(build: Build, seed: u64) -> Vec<Vec<f32>> {
    let mut arena = vec![0.0f32; 16 * 1024];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    build(&mut g, seed);
    params(&g)
}

fn save(ck: &mut AbCheckpoint<CutFlash>, build: Build, seed: u64) -> Result<SlotInfo, Error> {
    let mut arena = vec![0.0f32; 16 * 1024];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    build(&mut g, seed);
    ck.save(&g, &[])
}

/// Loads the newest good save into a fresh model and returns its values; a failed
/// load must leave the model as it was.
fn load(ck: &mut AbCheckpoint<CutFlash>, build: Build) -> Result<(SlotInfo, Vec<Vec<f32>>), Error> {
    let mut arena = vec![0.0f32; 16 * 1024];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    build(&mut g, 999);
    let before = params(&g);
    let mut scratch = vec![0u8; ck.capacity()];
    match ck.load(&mut g, &mut scratch) {
        Ok(info) => Ok((info, params(&g))),
        Err(e) => {
            assert_eq!(params(&g), before, "a failed load changed the model");
            Err(e)
        }
    }
}

fn save_w1(ck: &mut AbCheckpoint<CutFlash>, seed: u64) -> Result<SlotInfo, Error> {
    save(ck, w1, seed)
}

fn load_w1(ck: &mut AbCheckpoint<CutFlash>) -> Result<(SlotInfo, Vec<Vec<f32>>), Error> {
    load(ck, w1)
}

fn w1_values(seed: u64) -> Vec<Vec<f32>> {
    values(w1, seed)
}

const SLOT: u32 = 26 * ERASE as u32; // 26,624 bytes: a 64-byte header + 25,036 of W1

fn checkpoint(flash: CutFlash) -> AbCheckpoint<CutFlash> {
    AbCheckpoint::new(flash, 0, SLOT).unwrap()
}

/// Cuts the power after every possible number of units (bytes written, pages erased)
/// during a save of `next` onto `image`, reboots, and checks that the newest complete
/// save (`last` = (seq, seed), or none) loads. Returns the units of a complete save.
fn cut_everywhere(image: &CutFlash, build: Build, last: Option<(u32, u64)>, next: u64) -> usize {
    let mut probe = image.clone();
    probe.used = 0;
    let mut full = checkpoint(probe);
    let done = save(&mut full, build, next).unwrap();
    let total = full.into_inner().used;
    let want_last = last.map(|(seq, seed)| (seq, values(build, seed)));
    for cut in 0..total {
        let mut flash = image.clone();
        flash.budget = Some(cut);
        let mut ck = checkpoint(flash);
        assert!(
            save(&mut ck, build, next).is_err(),
            "save survived a cut at {cut}"
        );
        let mut flash = ck.into_inner();
        flash.power_on();
        let mut ck = checkpoint(flash);
        match (&want_last, load(&mut ck, build)) {
            (Some((seq, vals)), Ok((info, got))) => {
                assert_eq!(info.seq, *seq, "cut at {cut}");
                assert!(
                    got == *vals,
                    "cut at {cut}: loaded weights are not the last good save"
                );
            }
            (None, Err(e)) => assert!(matches!(e, Error::Corrupt { .. }), "cut at {cut}: {e:?}"),
            (want, got) => panic!(
                "cut at {cut}: wanted seq {:?}, got {:?}",
                want.as_ref().map(|w| w.0),
                got.map(|(info, _)| info)
            ),
        }
    }
    // With enough power the save completes and the new weights load.
    let mut flash = image.clone();
    flash.budget = Some(total);
    let mut ck = checkpoint(flash);
    assert_eq!(save(&mut ck, build, next).unwrap(), done);
    let (info, got) = load(&mut ck, build).unwrap();
    assert!(info.seq == done.seq && got == values(build, next));
    total
}

/// First, second and third save of a model, each cut at every possible unit.
fn cut_three_saves(build: Build, check_first_two: bool) -> usize {
    let empty = CutFlash::new(2 * SLOT as usize);
    // First save: nothing to fall back to, so a cut leaves "no save" (an error).
    if check_first_two {
        cut_everywhere(&empty, build, None, 1);
    }
    let mut ck = checkpoint(empty);
    assert_eq!(save(&mut ck, build, 1).unwrap().slot, 0);
    let one = ck.into_inner();
    // Second save goes to slot B; a cut keeps A.
    if check_first_two {
        cut_everywhere(&one, build, Some((1, 1)), 2);
    }
    let mut ck = checkpoint(one);
    assert_eq!(save(&mut ck, build, 2).unwrap().slot, 1);
    let two = ck.into_inner();
    // Third save overwrites A while B holds the last good weights.
    let units = cut_everywhere(&two, build, Some((2, 2)), 3);
    let mut ck = checkpoint(two);
    let third = save(&mut ck, build, 3).unwrap();
    assert_eq!((third.slot, third.seq), (0, 3));
    units
}

#[test]
fn tiny_model_a_cut_at_any_byte_of_the_first_three_saves_keeps_the_last_good_weights() {
    // 26 erase pages, 384 bytes of file (a multiple of 64 already), 16 of commit header.
    assert_eq!(cut_three_saves(tiny, true), 26 + 384 + 16);
}

#[test]
fn w1_a_cut_at_any_byte_while_overwriting_the_older_slot_keeps_the_last_good_weights() {
    // 26 erase pages, 25,088 bytes of file (25,036 rounded up to 64), 16 of header.
    assert_eq!(cut_three_saves(w1, false), 26 + 25_088 + 16);
}

#[test]
fn a_corrupt_newest_slot_falls_back_and_is_overwritten_next() {
    let mut ck = checkpoint(CutFlash::new(2 * SLOT as usize));
    save_w1(&mut ck, 1).unwrap();
    save_w1(&mut ck, 2).unwrap();
    let mut flash = ck.into_inner();
    // Bit rot in slot B's weights (a byte in the middle of the file).
    flash.mem[SLOT as usize + 64 + 10_000] ^= 0x10;
    let mut ck = checkpoint(flash);
    let (info, got) = load_w1(&mut ck).unwrap();
    assert_eq!((info.slot, info.seq), (0, 1));
    assert!(got == w1_values(1));
    // The next save must replace the bad slot B, not the good slot A.
    let s = save_w1(&mut ck, 3).unwrap();
    assert_eq!((s.slot, s.seq), (1, 2));
    assert!(load_w1(&mut ck).unwrap().1 == w1_values(3));
}

#[test]
fn misfit_layouts_and_buffers_are_errors() {
    let flash = CutFlash::new(2 * SLOT as usize);
    assert!(AbCheckpoint::new(flash.clone(), 0, SLOT + 1).is_err());
    assert!(AbCheckpoint::new(flash.clone(), 512, SLOT).is_err());
    assert!(AbCheckpoint::new(flash.clone(), 0, SLOT * 2).is_err());
    assert!(AbCheckpoint::new(flash.clone(), 0, 0).is_err());
    // A slot too small for W1.
    let mut small = AbCheckpoint::new(flash.clone(), 0, 8 * ERASE as u32).unwrap();
    assert!(matches!(save_w1(&mut small, 1), Err(Error::ShapeMismatch { .. })));
    // An empty flash has nothing to load.
    let mut ck = checkpoint(flash);
    assert!(matches!(load_w1(&mut ck), Err(Error::Corrupt { .. })));
    // A scratch buffer smaller than the save.
    save_w1(&mut ck, 1).unwrap();
    let mut arena = vec![0.0f32; 16 * 1024];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    digits_fcn(&mut g, &mut Rng::new(5)).unwrap();
    let mut scratch = vec![0u8; 1000];
    assert!(matches!(
        ck.load(&mut g, &mut scratch),
        Err(Error::ShapeMismatch { .. })
    ));
}
