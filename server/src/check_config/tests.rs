use super::*;

const STATIC_CLUSTER: &str = r#"
[cluster]
shards = 16
replication_factor = 3
ingesters = [
  { id = "ingester-0", addr = "127.0.0.1:9301" },
  { id = "ingester-1", addr = "127.0.0.1:9302" },
  { id = "ingester-2", addr = "127.0.0.1:9303" },
]
"#;

fn errors(role: Role, text: &str) -> Vec<String> {
    match validate_for_role(role, text) {
        Ok(c) => panic!("{} accepted {text:?}: {}", role.name(), c.summary),
        Err(e) => e,
    }
}

#[test]
fn empty_file_is_valid_for_serve_and_missing_cluster_table_is_named_for_every_cluster_role() {
    let ok = validate_for_role(Role::Serve, "").expect("defaults are a valid serve config");
    let auto = format!("the recorded shard count (a new directory: {})", crate::config::automatic_shards());
    assert!(ok.summary.starts_with(&auto), "{}", ok.summary);
    assert!(ok.notes.is_empty());
    for role in Role::ALL.into_iter().filter(|r| r.is_cluster()) {
        let e = errors(role, "");
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("[cluster] table is missing") && e[0].contains(role.name()), "{e:?}");
    }
}

#[test]
fn static_membership_is_valid_for_every_cluster_role_and_summarised() {
    for role in Role::ALL.into_iter().filter(|r| r.is_cluster()) {
        let ok = validate_for_role(role, STATIC_CLUSTER).expect("valid cluster config");
        assert_eq!(
            ok.summary,
            "cluster: 16 shards, replication factor 3, write quorum 2, 3 ingesters, placement hrw-bounded-v1"
        );
    }
}

#[test]
fn serve_ignores_an_invalid_cluster_table_but_says_so() {
    let text = "[cluster]\nreplication_factor = 0\n";
    let ok = validate_for_role(Role::Serve, text).expect("serve ignores [cluster]");
    assert_eq!(ok.notes, vec!["the [cluster] table is ignored by `tessera serve`".to_owned()]);
    let e = errors(Role::Gateway, text);
    assert!(e[0].contains("cluster.replication_factor"), "{e:?}");
}

#[test]
fn statefulset_form_needs_an_addr_template_with_the_ordinal() {
    let e = errors(Role::Ingester, "[cluster]\ningester_count = 3\n");
    assert!(e[0].contains("cluster.ingester_addr_template must contain {i}"), "{e:?}");
    let ok = validate_for_role(
        Role::Ingester,
        "[cluster]\ningester_count = 3\ningester_addr_template = \"tessera-ingester-{i}.tessera-ingester:9095\"\n",
    )
    .expect("StatefulSet form is valid");
    assert!(ok.summary.contains("3 ingesters"), "{}", ok.summary);
}

#[test]
fn more_replicas_than_ingesters_is_refused_naming_the_cause() {
    let text = STATIC_CLUSTER.replace("replication_factor = 3", "replication_factor = 4");
    let e = errors(Role::Distributor, &text);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].starts_with("cluster:"), "{e:?}");
}

#[test]
fn unknown_key_is_refused_with_its_name_for_every_role() {
    for role in Role::ALL {
        let e = errors(role, "[cluster]\nreplicas = 3\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("replicas"), "{e:?}");
    }
}

#[test]
fn common_and_cluster_errors_are_reported_together() {
    let text = format!("[http]\nmax_connections = 0\n{}", STATIC_CLUSTER.replace("shards = 16", "shards = 0"));
    let e = errors(Role::Querier, &text);
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(e[0].contains("http.max_connections"), "{e:?}");
    assert!(e[1].contains("cluster.shards"), "{e:?}");
    // serve sees only the common error.
    assert_eq!(errors(Role::Serve, &text).len(), 1);
}

#[test]
fn empty_data_dir_is_refused_for_the_roles_that_store_data_only() {
    let text = format!("data_dir = \"\"\n{STATIC_CLUSTER}");
    assert!(errors(Role::Serve, &text)[0].contains("data_dir"));
    assert!(errors(Role::Ingester, &text)[0].contains("data_dir"));
    validate_for_role(Role::Gateway, &text).expect("a gateway stores nothing");
}

#[test]
fn a_cluster_key_that_is_not_a_table_is_refused_naming_it() {
    let e = errors(Role::Ingester, "cluster = 3\n");
    // The typed parse refuses it first, naming the key.
    assert!(e[0].contains("cluster"), "{e:?}");
}

#[test]
fn example_configs_in_deploy_pass_their_roles() {
    let root =
        Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR when it runs tests"))
            .join("..");
    check_file(Role::Serve, &root.join("deploy/tessera.toml")).expect("annotated example is a valid serve config");
    // Its [cluster] table lists no ingesters: a cluster role must say which key to set.
    let e = check_file(Role::Ingester, &root.join("deploy/tessera.toml")).expect_err("no ingesters");
    assert!(e[0].contains("cluster.ingesters") && e[0].contains("cluster.ingester_count"), "{e:?}");
    for role in Role::ALL {
        check_file(role, &root.join("deploy/cluster/local.toml")).expect("local cluster example");
    }
}

#[test]
fn unreadable_file_is_an_error_not_a_panic() {
    let e = check_file(Role::Serve, Path::new("/nonexistent/tessera.toml")).expect_err("missing file");
    assert!(e[0].starts_with("cannot read the file"), "{e:?}");
}
