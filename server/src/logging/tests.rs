use super::{JsonStr, Now, component};

#[test]
fn strings_are_written_as_json_a_parser_reads_back() {
    for s in [
        "",
        "plain",
        "quote \" backslash \\ slash /",
        "lines\nand\ttabs\r",
        "control \u{1} \u{1f} and DEL \u{7f}",
        "ünïcödé ✓ and 🦀",
        "\u{0}",
    ] {
        let json = JsonStr(s).to_string();
        let back: String = serde_json::from_str(&json).expect(&json);
        assert_eq!(back, s, "{json}");
    }
}

#[test]
fn the_time_is_rfc_3339_and_moves_on() {
    let before = jiff::Timestamp::now();
    let first: jiff::Timestamp = Now.to_string().parse().expect("RFC 3339");
    let second: jiff::Timestamp = Now.to_string().parse().expect("RFC 3339");
    let after = jiff::Timestamp::now();
    assert!(before <= first && first <= second && second <= after);
}

#[test]
fn component_is_the_module_or_the_crate() {
    assert_eq!(component("vitistack::source::kube"), "source");
    assert_eq!(component("vitistack::http"), "http");
    assert_eq!(component("vitistack"), "vitistack");
    assert_eq!(component("sqlx::query"), "sqlx");
}
