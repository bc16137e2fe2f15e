//! What replicas put in Redis is sealed with their shared key (XChaCha20-Poly1305, as the
//! credentials are: a random nonce per message, the key's name as associated data), so that a
//! record read back under another name, or altered, or sealed with another key, is refused.

use chacha20poly1305::{
    aead::{Aead, Generate, KeyInit, Payload},
    XChaCha20Poly1305, XNonce,
};

const NONCE_BYTES: usize = 24;

pub struct Seal {
    cipher: XChaCha20Poly1305,
}

impl Seal {
    pub fn new(key: [u8; 32]) -> Self {
        Self {
            cipher: XChaCha20Poly1305::new(&key.into()),
        }
    }

    /// `plain` sealed for the place named `aad`: the nonce, then the ciphertext.
    pub fn seal(&self, aad: &str, plain: &[u8]) -> Option<Vec<u8>> {
        let nonce = XNonce::generate();
        let payload = Payload {
            msg: plain,
            aad: aad.as_bytes(),
        };
        let sealed = self.cipher.encrypt(&nonce, payload).ok()?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Some(out)
    }

    /// What [`seal`](Self::seal) sealed for `aad`; `None` for anything else.
    pub fn open(&self, aad: &str, sealed: &[u8]) -> Option<Vec<u8>> {
        if sealed.len() < NONCE_BYTES {
            return None;
        }
        let (nonce, sealed) = sealed.split_at(NONCE_BYTES);
        let nonce = XNonce::try_from(nonce).ok()?;
        let payload = Payload {
            msg: sealed,
            aad: aad.as_bytes(),
        };
        self.cipher.decrypt(&nonce, payload).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_record_opens_only_under_its_own_name_and_key() {
        let seal = Seal::new([7; 32]);
        let sealed = seal.seal("session:a", b"owner alice").unwrap();
        assert_eq!(seal.open("session:a", &sealed).unwrap(), b"owner alice");
        assert!(seal.open("session:b", &sealed).is_none(), "another name");
        assert!(Seal::new([8; 32]).open("session:a", &sealed).is_none());
        let mut altered = sealed.clone();
        let last = altered.len() - 1;
        altered[last] ^= 1;
        assert!(seal.open("session:a", &altered).is_none(), "altered");
        assert!(seal.open("session:a", b"short").is_none());
    }
}
