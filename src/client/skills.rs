//! Skills (SEP-2640, the `io.modelcontextprotocol/skills` extension, feature `skills`): a server
//! lists its skills with `skills/list`, each an entry naming its `SKILL.md` (a `skill://` URI),
//! the frontmatter the host may show before loading it, and the `digest` (`sha256:…`) and
//! `size` of every file. Nothing is fetched ahead of need: [`Client::skills`] reads the entries
//! only; [`Skill::load`] fetches `SKILL.md`, [`Skill::read`] one of its files, each verified
//! (its size, then its digest) before a byte is handed out, and `SKILL.md`'s YAML frontmatter
//! compared field by field with the entry's. Any difference is a [`SkillError`]; the content is
//! never returned.

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::Digest as _;

use super::{AllPages, Client, Page};
use crate::{error::Error, protocol::resources::ResourceContents};

/// The extension's identifier, as declared in capabilities.
pub const EXTENSION: &str = "io.modelcontextprotocol/skills";

/// A skill as the server lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SkillEntry {
    /// Its `SKILL.md` (`skill://<path>/SKILL.md`).
    pub uri: String,
    /// The frontmatter of its `SKILL.md` (`name`, `description`, ...), as the server states it.
    #[serde(default)]
    pub frontmatter: Map<String, Value>,
    /// Every file of the skill, `SKILL.md` included, with its digest and size.
    #[serde(default)]
    pub resources: Vec<SkillFile>,
    /// Other fields (`_meta`, ...), as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One file of a skill: what its content must be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SkillFile {
    /// Its URI, read with `resources/read`.
    pub uri: String,
    /// `sha256:` and the lowercase hex SHA-256 of its bytes.
    pub digest: String,
    /// Its length in bytes.
    pub size: u64,
}

/// Why a skill's file was refused (its content is never handed out) or could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SkillError {
    /// Reading it failed.
    #[error(transparent)]
    Client(#[from] Error),
    /// The file is not one the skill's entry lists.
    #[error("{uri} is not a file of this skill")]
    NotListed {
        /// The file asked for.
        uri: String,
    },
    /// Its length is not the entry's.
    #[error("{uri}: {got} bytes, where the skill's entry says {expected}")]
    Size {
        /// The file.
        uri: String,
        /// The entry's size.
        expected: u64,
        /// The length read.
        got: u64,
    },
    /// Its digest is not the entry's.
    #[error("{uri}: its content does not match the digest of the skill's entry")]
    Digest {
        /// The file.
        uri: String,
        /// The entry's digest.
        expected: String,
        /// The digest of what was read.
        got: String,
    },
    /// A field of `SKILL.md`'s frontmatter differs from the entry's (or only one has it).
    #[error("{uri}: frontmatter field {field:?} is not the one the skill's entry states")]
    Frontmatter {
        /// The `SKILL.md`.
        uri: String,
        /// The first field that differs.
        field: String,
    },
    /// The content is not what a skill's file can be (no text, no frontmatter, bad YAML).
    #[error("{uri}: {why}")]
    Malformed {
        /// The file.
        uri: String,
        /// What is wrong.
        why: String,
    },
}

/// A skill of a server: its entry, and its files fetched only when asked.
#[derive(Clone)]
pub struct Skill {
    client: Client,
    entry: SkillEntry,
}

impl std::fmt::Debug for Skill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Skill").field("entry", &self.entry).finish()
    }
}

/// A page of `skills/list`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ListSkillsResult {
    skills: Vec<SkillEntry>,
    #[serde(default)]
    next_cursor: Option<String>,
}

impl Page for ListSkillsResult {
    type Item = SkillEntry;
    const METHOD: &'static str = "skills/list";
    fn into_parts(self) -> (Vec<SkillEntry>, Option<String>) {
        (self.skills, self.next_cursor)
    }
}

impl Client {
    /// `skills/list`, every page (as [`Client::tools`] follows them): the server's skills, none
    /// of their files fetched.
    pub async fn skills(&self) -> Result<Vec<Skill>, Error> {
        let entries = AllPages::<ListSkillsResult>::new(self.clone()).await?;
        let skill = |entry| Skill {
            client: self.clone(),
            entry,
        };
        Ok(entries.into_iter().map(skill).collect())
    }
}

impl Skill {
    /// The entry the server listed.
    pub fn entry(&self) -> &SkillEntry {
        &self.entry
    }

    /// The skill's name, from its entry's frontmatter.
    pub fn name(&self) -> Option<&str> {
        self.entry.frontmatter.get("name")?.as_str()
    }

    /// Fetches `SKILL.md`, verifies it and compares its frontmatter with the entry's: its text.
    pub async fn load(&self) -> Result<String, SkillError> {
        let uri = self.entry.uri.clone();
        let bytes = self.read(&uri).await?;
        let text = String::from_utf8(bytes).map_err(|_| SkillError::Malformed {
            uri: uri.clone(),
            why: "SKILL.md is not UTF-8 text".into(),
        })?;
        let frontmatter = frontmatter(&text).ok_or_else(|| SkillError::Malformed {
            uri: uri.clone(),
            why: "SKILL.md has no YAML frontmatter between --- lines".into(),
        })?;
        let parsed: Map<String, Value> =
            yaml_serde::from_str(frontmatter).map_err(|e| SkillError::Malformed {
                uri: uri.clone(),
                why: format!("its frontmatter: {e}"),
            })?;
        if let Some(field) = first_difference(&self.entry.frontmatter, &parsed) {
            return Err(SkillError::Frontmatter { uri, field });
        }
        Ok(text)
    }

    /// Fetches one file of the skill (by its URI, or its path inside the skill's directory, e.g.
    /// `references/FORMS.md`), verified against the entry: its bytes.
    pub async fn read(&self, file: &str) -> Result<Vec<u8>, SkillError> {
        let listed = self.file(file).ok_or_else(|| SkillError::NotListed {
            uri: file.to_owned(),
        })?;
        let result = self.client.read_resource(&listed.uri).await?;
        let contents = result.contents.into_iter().next();
        let bytes = match contents {
            Some(ResourceContents::Text { text, .. }) => text.into_bytes(),
            Some(ResourceContents::Blob { blob, .. }) => base64::engine::general_purpose::STANDARD
                .decode(blob)
                .map_err(|e| SkillError::Malformed {
                    uri: listed.uri.clone(),
                    why: format!("its blob is not base64: {e}"),
                })?,
            None => {
                let why = "the server sent no contents".to_owned();
                return Err(SkillError::Malformed {
                    uri: listed.uri.clone(),
                    why,
                });
            }
        };
        verify(listed, &bytes)?;
        Ok(bytes)
    }

    /// The entry's file named `file`: its URI, or a path relative to the `SKILL.md`.
    fn file(&self, file: &str) -> Option<&SkillFile> {
        let base = self.entry.uri.rsplit_once('/').map_or("", |(dir, _)| dir);
        let under = format!("{base}/{file}");
        let files = &self.entry.resources;
        files.iter().find(|f| f.uri == file || f.uri == under)
    }
}

/// The size first (a length that differs fails without hashing), then the digest.
fn verify(file: &SkillFile, bytes: &[u8]) -> Result<(), SkillError> {
    let got = bytes.len() as u64;
    if got != file.size {
        return Err(SkillError::Size {
            uri: file.uri.clone(),
            expected: file.size,
            got,
        });
    }
    let digest = format!("sha256:{:x}", sha2::Sha256::digest(bytes));
    if !digest.eq_ignore_ascii_case(&file.digest) {
        return Err(SkillError::Digest {
            uri: file.uri.clone(),
            expected: file.digest.clone(),
            got: digest,
        });
    }
    Ok(())
}

/// The YAML between a first `---` line and the next one.
fn frontmatter(text: &str) -> Option<&str> {
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let end = rest.find("\n---")?;
    Some(&rest[..end])
}

/// The first field (in name order) that one side has and the other has not, or has otherwise.
fn first_difference(stated: &Map<String, Value>, parsed: &Map<String, Value>) -> Option<String> {
    let mut names: Vec<&String> = stated.keys().chain(parsed.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .find(|name| stated.get(*name) != parsed.get(*name))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(content: &str) -> SkillFile {
        let digest = format!("sha256:{:x}", sha2::Sha256::digest(content));
        SkillFile {
            uri: "skill://x/SKILL.md".into(),
            digest,
            size: content.len() as u64,
        }
    }

    #[test]
    fn a_file_is_taken_only_with_its_entrys_size_and_digest() {
        let listed = file("body\n");
        assert!(verify(&listed, b"body\n").is_ok());
        assert!(matches!(
            verify(&listed, b"body\nmore"),
            Err(SkillError::Size { got: 9, .. })
        ));
        assert!(matches!(
            verify(&listed, b"evil\n"),
            Err(SkillError::Digest { .. })
        ));
    }

    #[test]
    fn the_frontmatter_is_compared_field_by_field() {
        let text = "---\nname: pdf\ndescription: Fill PDFs\n---\n\nBody.\n";
        let parsed: Map<String, Value> = yaml_serde::from_str(frontmatter(text).unwrap()).unwrap();
        let stated = json!({"name": "pdf", "description": "Fill PDFs"});
        let stated = stated.as_object().unwrap();
        assert_eq!(first_difference(stated, &parsed), None);
        let other = json!({"name": "pdf", "description": "Exfiltrate credentials"});
        assert_eq!(
            first_difference(other.as_object().unwrap(), &parsed).as_deref(),
            Some("description")
        );
        let more = json!({"name": "pdf", "description": "Fill PDFs", "license": "MIT"});
        assert_eq!(
            first_difference(more.as_object().unwrap(), &parsed).as_deref(),
            Some("license")
        );
        assert_eq!(frontmatter("no frontmatter"), None);
    }
}
