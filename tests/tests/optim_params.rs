//! Optimizer hyperparameters out of their domain are refused as PyTorch refuses them
//! (and NaN too), with the value printed as given (issue 38: a NaN momentum was
//! reported as "got 0").

use torchlet::optim::{Adam, Sgd};
use torchlet::{Error, Graph};

#[test]
fn sgd_and_adam_refuse_bad_hyperparameters_naming_the_value() {
    let mut arena = vec![0.0f32; 1024];
    let mut g: Graph<f32, 8> = Graph::new(&mut arena);
    g.param(&[4]).unwrap();
    let used = g.arena().used_bytes();
    for (lr, m, wd, want) in [
        (
            -0.1,
            0.0,
            0.0,
            "Sgd::new: learning rate must be finite and at least 0 (got -0.1)",
        ),
        (
            f32::NAN,
            0.0,
            0.0,
            "Sgd::new: learning rate must be finite and at least 0 (got NaN)",
        ),
        (
            f32::INFINITY,
            0.0,
            0.0,
            "Sgd::new: learning rate must be finite and at least 0 (got inf)",
        ),
        (0.1, 1.0, 0.0, "Sgd::new: momentum must be in [0, 1) (got 1)"),
        (0.1, -0.5, 0.0, "Sgd::new: momentum must be in [0, 1) (got -0.5)"),
        (
            0.1,
            f32::NAN,
            0.0,
            "Sgd::new: momentum must be in [0, 1) (got NaN)",
        ),
        (
            0.1,
            0.9,
            -1.0,
            "Sgd::new: weight decay must be finite and at least 0 (got -1)",
        ),
        (
            0.1,
            0.9,
            f32::NAN,
            "Sgd::new: weight decay must be finite and at least 0 (got NaN)",
        ),
    ] {
        let e = Sgd::new(&mut g, lr, m, wd).unwrap_err();
        assert!(matches!(e, Error::InvalidFloat { .. }), "{e:?}");
        assert_eq!(e.to_string(), want);
    }
    // Nothing was allocated by the refusals; the CLI's plan settings (momentum 0) and
    // ordinary ones are accepted.
    assert_eq!(g.arena().used_bytes(), used);
    Sgd::new(&mut g, 0.01, 0.0, 0.0).unwrap();
    let mut sgd = Sgd::new(&mut g, 0.0, 0.9, 1e-4).unwrap();
    // The fields are public: a bad value set later is refused by the step.
    sgd.momentum = f32::NAN;
    assert_eq!(
        sgd.step(&mut g).unwrap_err().to_string(),
        "Sgd::step: momentum must be in [0, 1) (got NaN)"
    );
    assert!(Adam::new(&mut g, -1e-3).is_err());
    let mut adam = Adam::new(&mut g, 1e-3).unwrap();
    for (betas, eps, want) in [
        ((1.0, 0.999), 1e-8, "Adam::step: beta 1 must be in [0, 1) (got 1)"),
        (
            (0.9, f32::NAN),
            1e-8,
            "Adam::step: beta 2 must be in [0, 1) (got NaN)",
        ),
        (
            (0.9, 0.999),
            0.0,
            "Adam::step: eps must be finite and above 0 (got 0)",
        ),
        (
            (0.9, 0.999),
            f32::NAN,
            "Adam::step: eps must be finite and above 0 (got NaN)",
        ),
    ] {
        adam.betas = betas;
        adam.eps = eps;
        assert_eq!(adam.step(&mut g).unwrap_err().to_string(), want);
    }
}
