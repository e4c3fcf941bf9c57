use super::*;

fn rewrite(text: &str, name: Option<&str>) -> Option<Prepared> {
    let doc = async_graphql::parser::parse_query(text).ok()?;
    as_query(text, &doc, name)
}

#[test]
fn the_subscription_keyword_becomes_query_at_the_same_positions() {
    let text = "# a comment with ünïcode\n  subscription S($k: [String!]) { resourceChanged(kinds: $k) { type } }";
    let Prepared { query: q, title } = rewrite(text, None).expect("rewritten");
    assert_eq!(q.len(), text.len());
    assert_eq!(title, "Subscription \"S\"");
    assert!(q.contains("  query        S($k"), "{q}");
    let two = "query A { datacenter { name } }\nsubscription B { hostsChanged { hosts } }";
    assert_eq!(
        rewrite(two, Some("B")),
        Some(Prepared {
            query: "                               \nquery        B { hostsChanged { hosts } }"
                .into(),
            title: "Subscription \"B\"".into()
        })
    );
    assert_eq!(rewrite(two, Some("A")), None, "a query stays a query");
    // Other operations and the fragments only they use are blanked (the event schema
    // would refuse them); positions in the kept operation do not move.
    let many = "query A { ...F }\nfragment F on Query { sequence }\nsubscription B { hostsChanged { ...G } }\nfragment G on HostCapacity { hosts }";
    let Prepared { query: q, .. } = rewrite(many, Some("B")).expect("rewritten");
    assert_eq!(q.len(), many.len());
    assert_eq!(
        q.trim(),
        "query        B { hostsChanged { ...G } }\nfragment G on HostCapacity { hosts }"
    );
    assert_eq!(rewrite(two, None), None, "two operations and no name");
    assert_eq!(rewrite("{ datacenter { name } }", None), None);
}

/// The event schema's root is what the served `Subscription` type says, field for field:
/// names, argument names, types and defaults, and result types.
#[tokio::test]
async fn the_event_root_has_the_served_subscription_fields() {
    let settings = crate::graphql::SchemaSettings::default();
    let q = r#"{ __type(name: "Subscription") { fields { name
        type { ...T } args { name defaultValue type { ...T } } } } }
        fragment T on __Type { kind name ofType { kind name ofType { kind name ofType { kind name } } } }"#;
    let served = crate::graphql::build_schema(&settings).execute(q).await;
    let ours = crate::graphql::build_executor_schemas(&settings)
        .open
        .execute(q)
        .await;
    assert!(served.errors.is_empty() && ours.errors.is_empty());
    let fields = served.data.to_string();
    assert!(fields.contains("clusterChanged"), "{fields}");
    assert_eq!(fields, ours.data.to_string());
}
