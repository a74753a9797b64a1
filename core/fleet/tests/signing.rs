//! Signatures as Flower makes and checks them (flwr/supercore/primitives/asymmetric.py):
//! the fixture's key, timestamp and signature come from Flower's own `sign_message`.

use torchlet_fleet::sign::{verify, Identity};

fn fixture() -> serde_json::Value {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/objects.json")).unwrap();
    serde_json::from_str::<serde_json::Value>(&text).unwrap()["signature"].clone()
}

fn b64(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

#[test]
fn flowers_signature_verifies_and_ours_has_the_same_form() {
    let f = fixture();
    let (private, public, ts) = (
        f["private_key_pem"].as_str().unwrap(),
        f["public_key_pem"].as_str().unwrap(),
        f["timestamp"].as_str().unwrap(),
    );
    let flowers = b64(f["signature_b64"].as_str().unwrap());
    verify(public, ts.as_bytes(), &flowers).unwrap();
    assert!(verify(public, b"2026-12-01T21:30:00.123457+00:00", &flowers).is_err());
    let identity = Identity::from_pem(private).unwrap();
    assert_eq!(
        identity.public_pem(),
        public,
        "the public PEM the SuperLink keys the node by"
    );
    let headers = identity.headers(ts).unwrap();
    assert_eq!(b64(&headers.public_key), public.as_bytes());
    verify(public, ts.as_bytes(), &b64(&headers.signature)).unwrap();
    // The key survives a PEM round trip.
    let again = Identity::from_pem(&identity.to_pem().unwrap()).unwrap();
    assert_eq!(again.public_pem(), public);
}

#[test]
fn bad_keys_are_errors() {
    assert!(Identity::from_pem("not a key").is_err());
    // A P-256 key is not a P-384 one.
    let p256 = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgevZzL1gdAFr88hb2\nOF/2NxApJCzGCEDdfSp6VQO30hyhRANCAAQRWz+jn65BtOMvdyHKcvjBeBSDZH2r\n1RTwjmYSi9R/zpBnuQ4EiMnCqfMPWiZqB4QdbAd0E7oH50VpuZ1P087G\n-----END PRIVATE KEY-----\n";
    assert!(Identity::from_pem(p256).is_err());
}
