//! YAML as Kubernetes reads it (`kubectl apply -f`): a stream of
//! documents separated by `---`, each an object serialized from its own
//! type ([`serde_yaml_ng`]) with a comment before it saying what it is
//! for, wrapped at 78 columns.

use super::{Export, ExportError};

/// A multi-document YAML stream, built a document at a time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Documents {
    parts: Vec<String>,
}

impl Documents {
    /// Adds `object` with `about` before it as a comment (its words
    /// rewrapped; its line breaks are not kept).
    pub fn push<T: serde::Serialize>(
        &mut self,
        about: &str,
        object: &T,
    ) -> Result<(), ExportError> {
        let yaml = serde_yaml_ng::to_string(object).map_err(|e| ExportError::Render {
            format: Self::FORMAT,
            reason: e.to_string(),
        })?;
        self.parts.push(comment(about) + &yaml);
        Ok(())
    }

    /// Adds a document of comment lines only (each kept as written: a
    /// command to run, indented), where an object is left to the reader.
    pub fn push_note(&mut self, lines: &[&str]) {
        self.parts.push(
            lines
                .iter()
                .map(|line| format!("# {line}\n"))
                .collect::<String>(),
        );
    }
}

impl Export for Documents {
    const FORMAT: &'static str = "YAML";
    const MEDIA_TYPE: &'static str = "application/yaml";

    fn render(&self) -> Result<String, ExportError> {
        Ok(self.parts.join("---\n"))
    }
}

/// `text` as `#` lines of at most 76 columns (a word longer stands alone).
fn comment(text: &str) -> String {
    let mut out = String::new();
    let mut line = String::from("#");
    for word in text.split_whitespace() {
        if line.len() + 1 + word.len() > 76 && line.len() > 1 {
            out.push_str(&line);
            out.push('\n');
            line = String::from("#");
        }
        line.push(' ');
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_document_has_its_comment_and_they_are_separated() {
        let mut docs = Documents::default();
        let long = "word ".repeat(30);
        docs.push(&long, &serde_json::json!({"kind": "Namespace"}))
            .unwrap();
        docs.push_note(&["make it apart:", "  netlab agent keygen"]);
        let text = docs.render().unwrap();
        let parts: Vec<&str> = text.split("---\n").collect();
        assert_eq!(parts.len(), 2, "{text}");
        assert!(
            parts[0]
                .lines()
                .take(2)
                .all(|l| l.starts_with("# word") && l.len() <= 76)
        );
        assert!(parts[0].ends_with("kind: Namespace\n"), "{text}");
        assert_eq!(parts[1], "# make it apart:\n#   netlab agent keygen\n");
        // What was read back is what was written.
        let first: serde_json::Value = serde_yaml_ng::from_str(parts[0]).unwrap();
        assert_eq!(first, serde_json::json!({"kind": "Namespace"}));
    }
}
