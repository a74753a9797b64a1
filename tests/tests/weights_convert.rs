//! Loading `f32` weights into a model of another scalar type goes through
//! `Scalar::from_f32`, the type's own rounding rule. The engine's fixed-point type is
//! another issue; this test defines a minimal stand-in, Q24.8 (`i32` with 8 fraction
//! bits, round to nearest, ties away from zero, saturating), to exercise that path now.

use core::ops::{Add, AddAssign, Mul, Neg, Sub};
use torchlet::init::Rng;
use torchlet::io;
use torchlet::nn::digits_fcn;
use torchlet::{Error, Graph, Scalar};

#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
struct Q8(i32);

impl Add for Q8 {
    type Output = Q8;
    fn add(self, o: Q8) -> Q8 {
        Q8(self.0.saturating_add(o.0))
    }
}
impl Sub for Q8 {
    type Output = Q8;
    fn sub(self, o: Q8) -> Q8 {
        Q8(self.0.saturating_sub(o.0))
    }
}
impl Mul for Q8 {
    type Output = Q8;
    fn mul(self, o: Q8) -> Q8 {
        Q8(((self.0 as i64 * o.0 as i64) >> 8) as i32)
    }
}
impl Neg for Q8 {
    type Output = Q8;
    fn neg(self) -> Q8 {
        Q8(self.0.saturating_neg())
    }
}
impl AddAssign for Q8 {
    fn add_assign(&mut self, o: Q8) {
        *self = *self + o;
    }
}

impl Scalar for Q8 {
    const NAME: &'static str = "q24.8";
    const ZERO: Self = Q8(0);
    const ONE: Self = Q8(256);
    const MIN: Self = Q8(i32::MIN);
    type Acc = i64;
    type Kernels = torchlet::bench::Reference;
    fn acc_zero() -> i64 {
        0
    }
    fn mac(acc: i64, a: Q8, b: Q8) -> i64 {
        acc + a.0 as i64 * b.0 as i64
    }
    fn acc_add(acc: i64, a: Q8) -> i64 {
        acc + ((a.0 as i64) << 8)
    }
    fn from_acc(acc: i64) -> Q8 {
        Q8((acc >> 8).clamp(i32::MIN as i64, i32::MAX as i64) as i32)
    }
    fn from_f32(v: f32) -> Q8 {
        // `as` saturates and maps NaN to 0.
        Q8((v * 256.0).round() as i32)
    }
    fn to_f32(self) -> f32 {
        self.0 as f32 / 256.0
    }
    fn to_bits(self) -> u32 {
        self.0 as u32
    }
    fn from_bits(bits: u32) -> Q8 {
        Q8(bits as i32)
    }
    fn div(self, rhs: Q8) -> Q8 {
        Q8::from_f32(self.to_f32() / rhs.to_f32())
    }
    fn exp(self) -> Q8 {
        Q8::from_f32(self.to_f32().exp())
    }
    fn ln(self) -> Q8 {
        Q8::from_f32(self.to_f32().ln())
    }
    fn sqrt(self) -> Q8 {
        Q8::from_f32(self.to_f32().sqrt())
    }
    fn tanh(self) -> Q8 {
        Q8::from_f32(self.to_f32().tanh())
    }
    fn sigmoid(self) -> Q8 {
        Q8::from_f32(1.0 / (1.0 + (-self.to_f32()).exp()))
    }
    fn is_finite(self) -> bool {
        true
    }
}

const TAPE: usize = 32;

fn f32_w1_file() -> (Vec<u8>, Vec<Vec<f32>>) {
    let mut arena = vec![0.0f32; 16 * 1024];
    let mut g: Graph<f32, TAPE> = Graph::new(&mut arena);
    digits_fcn(&mut g, &mut Rng::new(4)).unwrap();
    // Values that exercise the rounding rule: ties, saturation, NaN.
    let t = g.param_handle(7).unwrap();
    g.param_data_mut(t).unwrap()[..5].copy_from_slice(&[0.5 / 256.0, -1.5 / 256.0, 1e12, -1e12, f32::NAN]);
    let vals = (0..8)
        .map(|i| g.data(g.param_handle(i).unwrap()).unwrap().to_vec())
        .collect();
    let mut out = vec![0u8; io::saved_len(&g).unwrap()];
    io::save(&g, &mut out).unwrap();
    (out, vals)
}

#[test]
fn f32_file_loads_into_a_fixed_point_model_through_from_f32() {
    let (file, vals) = f32_w1_file();
    let mut arena = vec![Q8(0); 16 * 1024];
    let mut g: Graph<Q8, TAPE> = Graph::new(&mut arena);
    digits_fcn(&mut g, &mut Rng::new(9)).unwrap();
    io::load(&mut g, &file).unwrap();
    for (i, v) in vals.iter().enumerate() {
        let got = g.data(g.param_handle(i).unwrap()).unwrap();
        let want: Vec<Q8> = v.iter().map(|&x| Q8::from_f32(x)).collect();
        assert_eq!(got, &want[..], "parameter {i}");
    }
    let fc_bias = g.data(g.param_handle(7).unwrap()).unwrap();
    assert_eq!(&fc_bias[..5], &[Q8(1), Q8(-2), Q8(i32::MAX), Q8(i32::MIN), Q8(0)]);

    // The fixed-point model saves as "q24.8" and reloads bit for bit...
    let mut q_file = vec![0u8; io::saved_len(&g).unwrap()];
    io::save(&g, &mut q_file).unwrap();
    assert_eq!(
        io::Weights::parse(&q_file).unwrap().scalar_name().unwrap(),
        "q24.8"
    );
    let mut arena2 = vec![Q8(0); 16 * 1024];
    let mut g2: Graph<Q8, TAPE> = Graph::new(&mut arena2);
    digits_fcn(&mut g2, &mut Rng::new(10)).unwrap();
    io::load(&mut g2, &q_file).unwrap();
    for i in 0..8 {
        let (a, b) = (g.param_handle(i).unwrap(), g2.param_handle(i).unwrap());
        assert_eq!(g.data(a).unwrap(), g2.data(b).unwrap());
    }
    // ...but a q24.8 file is not silently reinterpreted by an f32 model.
    let mut arena3 = vec![0.0f32; 16 * 1024];
    let mut g3: Graph<f32, TAPE> = Graph::new(&mut arena3);
    digits_fcn(&mut g3, &mut Rng::new(11)).unwrap();
    assert!(matches!(
        io::load(&mut g3, &q_file),
        Err(Error::Unsupported { .. })
    ));
}
