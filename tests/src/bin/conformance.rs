//! The op conformance runner: `{"cases": [...]}` on stdin, `{"results": [...]}` on
//! stdout (format: `tests/golden/README.md`). Exits 2 only when stdin is not such a document.

use std::io::Read;

fn main() {
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        eprintln!("conformance: cannot read stdin: {e}");
        std::process::exit(2);
    }
    match torchlet_tests::conformance::run_document(&text) {
        Ok(results) => {
            let doc = serde_json::json!({ "results": results });
            println!("{doc}");
        }
        Err(e) => {
            eprintln!("conformance: stdin is not a cases document: {e}");
            std::process::exit(2);
        }
    }
}
