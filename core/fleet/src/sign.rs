//! The node's identity and the signed headers of every Fleet request.
//!
//! - Key: ECDSA P-384, PEM (PKCS#8 or SEC1 private key; the public key as SubjectPublicKeyInfo
//!   PEM, which is what register-node and activate-node carry and what the SuperLink keys
//!   nodes by).
//! - Headers: `flwr-public-key` = base64(public PEM), `flwr-timestamp` = ISO-8601 with an
//!   offset, `flwr-signature` = base64(DER ECDSA signature of the timestamp's bytes). Flower
//!   signs with SHA-256 whatever the curve (`ec.ECDSA(hashes.SHA256())`), so the SHA-256
//!   prehash is signed (RustCrypto's P-384 default digest would be SHA-384).

use crate::error::Error;
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use p384::ecdsa::signature::hazmat::{PrehashSigner, PrehashVerifier};
use p384::ecdsa::{DerSignature, Signature, SigningKey, VerifyingKey};
use p384::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey, LineEnding};
use rand_core::CryptoRngCore;
use sha2::{Digest, Sha256};

/// Header names (flwr/supercore/constant.py, common/constant.py).
pub const PUBLIC_KEY_HEADER: &str = "flwr-public-key";
pub const TIMESTAMP_HEADER: &str = "flwr-timestamp";
pub const SIGNATURE_HEADER: &str = "flwr-signature";

/// A node's P-384 key pair.
#[derive(Clone)]
pub struct Identity {
    key: SigningKey,
    public_pem: String,
}

/// The three authentication headers of one request.
#[derive(Debug, Clone, PartialEq)]
pub struct SignedHeaders {
    pub public_key: String,
    pub timestamp: String,
    pub signature: String,
}

impl Identity {
    /// A fresh key from `rng` (the OS generator in the client).
    pub fn generate(rng: &mut impl CryptoRngCore) -> Result<Identity, Error> {
        Identity::from_key(SigningKey::random(rng))
    }

    /// Reads a P-384 private key PEM ("PRIVATE KEY" PKCS#8, as Flower writes, or
    /// "EC PRIVATE KEY" SEC1, as `openssl ecparam -genkey` writes).
    pub fn from_pem(pem: &str) -> Result<Identity, Error> {
        let key = match p384::SecretKey::from_pkcs8_pem(pem) {
            Ok(secret) => secret,
            Err(pkcs8) => p384::SecretKey::from_sec1_pem(pem)
                .map_err(|_| Error::Key(format!("not a P-384 private key PEM (PKCS#8: {pkcs8})")))?,
        };
        Identity::from_key(SigningKey::from(key))
    }

    fn from_key(key: SigningKey) -> Result<Identity, Error> {
        let public_pem = key
            .verifying_key()
            .to_public_key_pem(LineEnding::LF)
            .map_err(|e| Error::Key(format!("public key PEM: {e}")))?;
        Ok(Identity { key, public_pem })
    }

    /// The private key as PKCS#8 PEM (to keep it for the next start).
    pub fn to_pem(&self) -> Result<String, Error> {
        let secret = p384::SecretKey::from(&self.key);
        let pem = secret
            .to_pkcs8_pem(LineEnding::LF)
            .map_err(|e| Error::Key(format!("PEM: {e}")))?;
        Ok(pem.to_string())
    }

    /// The public key PEM (SubjectPublicKeyInfo), as register-node sends it.
    pub fn public_pem(&self) -> &str {
        &self.public_pem
    }

    /// DER ECDSA signature of SHA-256(`message`).
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, Error> {
        let digest = Sha256::digest(message);
        let signature: Signature = self
            .key
            .sign_prehash(&digest)
            .map_err(|e| Error::Key(format!("signing: {e}")))?;
        let der: DerSignature = signature.to_der();
        Ok(der.as_bytes().to_vec())
    }

    /// The headers of a request made at `timestamp` (ISO-8601 with an offset).
    pub fn headers(&self, timestamp: &str) -> Result<SignedHeaders, Error> {
        Ok(SignedHeaders {
            public_key: BASE64.encode(self.public_pem.as_bytes()),
            timestamp: timestamp.to_string(),
            signature: BASE64.encode(self.sign(timestamp.as_bytes())?),
        })
    }
}

/// Checks a DER signature of SHA-256(`message`) by a public key PEM, as the SuperLink does.
pub fn verify(public_pem: &str, message: &[u8], der_signature: &[u8]) -> Result<(), Error> {
    let key = VerifyingKey::from_public_key_pem(public_pem)
        .map_err(|e| Error::Key(format!("public key PEM: {e}")))?;
    let signature =
        Signature::from_der(der_signature).map_err(|e| Error::Key(format!("DER signature: {e}")))?;
    key.verify_prehash(&Sha256::digest(message), &signature)
        .map_err(|_| Error::Key("the signature does not verify".to_string()))
}
