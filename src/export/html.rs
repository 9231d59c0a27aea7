//! HTML: every netlab page (the report, a mesh run's page) is one
//! [`Page`], its head carrying the one stylesheet (`page.css`, a file of
//! its own) and the page's own additions, its body the maker's.
//!
//! Invariant: text from records reaches a page only through [`escape`].

use super::{Export, ExportError};

/// The one stylesheet of every netlab page: the page's rules (its text,
/// figures and readings), the text tables' (what
/// [`crate::report::htmltext::text_to_html`] writes: tables that fit the
/// page, below 700 px each row a list of labelled values), the first
/// screen's table, and the page on paper (every fold open, no figure or
/// table row split across pages, links as plain text).
pub const STYLESHEET: &str = include_str!("page.css");

/// Text as HTML's characters: `&`, `<`, `>` and `"` escaped.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A netlab page: `title` as its title and first heading, the
/// stylesheet then `own_css` in its head, `body` (HTML, escaped by its
/// maker) after the heading.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub title: String,
    pub own_css: String,
    pub body: String,
}

impl Export for Page {
    const FORMAT: &'static str = "HTML";
    const MEDIA_TYPE: &'static str = "text/html; charset=utf-8";

    fn render(&self) -> Result<String, ExportError> {
        let title = escape(&self.title);
        let own = if self.own_css.is_empty() {
            String::new()
        } else {
            format!("{}\n", self.own_css)
        };
        Ok(format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n<style>\n{STYLESHEET}{own}</style></head><body>\n<h1>{title}</h1>\n{}</body></html>\n",
            self.body
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_escapes_its_title_and_carries_the_stylesheet_then_its_own() {
        let page = Page {
            title: "a <b> & \"c\"".into(),
            own_css: ".own { color: red }".into(),
            body: "<p>x</p>\n".into(),
        }
        .render()
        .unwrap();
        assert!(page.contains("<title>a &lt;b&gt; &amp; &quot;c&quot;</title>"));
        let sheet = page.find(STYLESHEET).unwrap();
        assert!(sheet < page.find(".own { color: red }").unwrap());
        assert!(page.ends_with("<p>x</p>\n</body></html>\n"), "{page}");
    }
}
