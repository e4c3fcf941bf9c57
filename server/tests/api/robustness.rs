//! Our parsers of outside input never panic: label selectors, cursors, global ids, manifests.
//! A deterministic random walk over inputs built from the characters each grammar cares about.

use async_graphql::connection::CursorType;
use vitistack::graphql::paging::Cursor;
use vitistack::graphql::selector;
use vitistack::graphql::types::decode_id;
use vitistack::source::manifest::parse_str;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    fn text(&mut self, alphabet: &[&str], max: u64) -> String {
        let n = self.next() % max;
        (0..n)
            .map(|_| alphabet[(self.next() % alphabet.len() as u64) as usize])
            .collect()
    }
}

#[test]
fn parsers_survive_random_input() {
    let mut rng = Rng(0x5eed);
    let selector_parts = [
        "a", "b", "=", "==", "!=", "!", ",", " in ", " notin ", "(", ")", " ", "/", ".", "-", "é",
        "\u{0}",
    ];
    let id_parts = [
        "A", "z", "0", "_", "-", "=", "+", "/", "W", "y", "J", "d", "Q", "\"", "[",
    ];
    let yaml_parts = [
        "apiVersion: vitistack.io/v1alpha1\n",
        "kind: Machine\n",
        "kind: MachineClass\n",
        "metadata:\n",
        "  name: x\n",
        "spec:\n",
        "  provider: 1\n",
        "  cpu: {cores: -1}\n",
        "---\n",
        "- a\n",
        ": :\n",
        "{",
        "}",
        "[",
        "]",
        "\"",
        "&a ",
        "*a\n",
        "  replicas: 2\n",
        "\t",
        "~\n",
        "!!binary aGk=\n",
    ];
    for _ in 0..20_000 {
        let s = rng.text(&selector_parts, 24);
        if let Ok(sel) = selector::parse(&s) {
            let _ = sel.matches(None);
        }
        let c = rng.text(&id_parts, 40);
        let _ = Cursor::decode_cursor(&c);
        let _ = decode_id(&c);
    }
    for _ in 0..3_000 {
        let doc = rng.text(&yaml_parts, 16);
        let report = parse_str("fuzz.yaml", &doc);
        assert!(
            report.accepted() || report.objects.is_empty(),
            "a refused file must apply nothing: {doc:?}"
        );
    }
}
