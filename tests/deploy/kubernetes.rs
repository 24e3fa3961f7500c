//! `deploy/kubernetes/`: rendered as `kustomize build` renders it, then checked object
//! by object against the config the ConfigMap carries.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use yaml_rust2::Yaml;

use crate::manifests::*;

/// The rendered base: every object of the listed resources plus the generated
/// ConfigMaps, with the kustomization's namespace.
struct Rendered {
    namespace: String,
    objects: Vec<Yaml>,
    /// Generated ConfigMap name → (key → file on disk).
    config_maps: BTreeMap<String, BTreeMap<String, PathBuf>>,
    /// Image names the kustomization sets a tag or registry for.
    images: Vec<String>,
}

fn dir() -> PathBuf {
    repo_root().join("deploy/kubernetes")
}

fn render() -> Rendered {
    let dir = dir();
    let k = load_yaml(&dir.join("kustomization.yaml")).remove(0);
    assert_eq!(str_of(&k["kind"], "kustomization kind"), "Kustomization");
    let namespace = str_of(&k["namespace"], "kustomization namespace").to_owned();
    let mut objects = Vec::new();
    for r in strings(&k["resources"], "resources") {
        let path = dir.join(&r);
        assert!(path.is_file(), "kustomization.yaml lists {r}, which is not a file");
        objects.extend(load_yaml(&path).into_iter().filter(|d| !d.is_null()));
    }
    let mut config_maps = BTreeMap::new();
    for g in list_of(&k["configMapGenerator"]) {
        let name = str_of(&g["name"], "configMapGenerator name").to_owned();
        let files = strings(&g["files"], "configMapGenerator files")
            .into_iter()
            .map(|f| {
                let path = dir.join(&f);
                assert!(path.is_file(), "configMapGenerator {name} lists {f}, which is not a file");
                let key = Path::new(&f).file_name().expect("file name").to_string_lossy().into_owned();
                (key, path)
            })
            .collect();
        config_maps.insert(name, files);
    }
    let images = list_of(&k["images"]).iter().map(|i| str_of(&i["name"], "images name").to_owned()).collect();
    Rendered { namespace, objects, config_maps, images }
}

impl Rendered {
    fn all(&self, kind: &str) -> Vec<&Yaml> {
        self.objects.iter().filter(|o| o["kind"].as_str() == Some(kind)).collect()
    }

    fn one(&self, kind: &str, name: &str) -> &Yaml {
        let found: Vec<_> =
            self.all(kind).into_iter().filter(|o| o["metadata"]["name"].as_str() == Some(name)).collect();
        assert_eq!(found.len(), 1, "expected exactly one {kind} {name}");
        found[0]
    }

    /// Workloads (StatefulSets and Deployments) with their pod templates.
    fn workloads(&self) -> Vec<&Yaml> {
        let mut w = self.all("StatefulSet");
        w.extend(self.all("Deployment"));
        assert!(!w.is_empty(), "no workloads rendered");
        w
    }

    /// The file a pod reads as `path`, if it is a key of a generated ConfigMap mounted
    /// by the pod.
    fn config_file(&self, pod: &Yaml, container: &Yaml, path: &str) -> PathBuf {
        for m in list_of(&container["volumeMounts"]) {
            let mount = str_of(&m["mountPath"], "mountPath");
            let Some(key) = path.strip_prefix(mount).and_then(|k| k.strip_prefix('/')) else { continue };
            let volume_name = str_of(&m["name"], "volumeMount name");
            let volume = list_of(&pod["volumes"])
                .iter()
                .find(|v| v["name"].as_str() == Some(volume_name))
                .unwrap_or_else(|| panic!("volumeMount {volume_name} has no volume"));
            let cm = str_of(&volume["configMap"]["name"], "volume configMap name");
            let files = self.config_maps.get(cm).unwrap_or_else(|| panic!("ConfigMap {cm} is not generated"));
            return files.get(key).unwrap_or_else(|| panic!("ConfigMap {cm} has no key {key}")).clone();
        }
        panic!("{path} is on no volume mount of the container");
    }
}

/// Each container of a workload as the process it runs.
fn processes(r: &Rendered) -> Vec<(&Yaml, &Yaml, Process, PathBuf)> {
    let mut out = Vec::new();
    for w in r.workloads() {
        let pod = &w["spec"]["template"]["spec"];
        for c in list_of(&pod["containers"]) {
            let name = format!("{}/{}", str_of(&w["metadata"]["name"], "name"), str_of(&c["name"], "container name"));
            let args = strings(&c["args"], "args");
            let role = args.first().unwrap_or_else(|| panic!("{name}: no args")).clone();
            let config_path = flag(&args, "config").unwrap_or_else(|| panic!("{name}: no --config"));
            let file = r.config_file(pod, c, &config_path);
            let config = load_config(&file);
            out.push((w, c, Process { name, role, args, config }, file));
        }
    }
    out
}

fn container_port(c: &Yaml, name: &str) -> u16 {
    let p = list_of(&c["ports"])
        .iter()
        .find(|p| p["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("container has no port named {name}"));
    u16::try_from(int_of(&p["containerPort"], "containerPort")).expect("port")
}

/// A probe's or Service's port: a name of a container port, or a number.
fn resolve_port(c: &Yaml, port: &Yaml) -> u16 {
    match port {
        Yaml::String(name) => container_port(c, name),
        other => u16::try_from(int_of(other, "port")).expect("port"),
    }
}

fn labels_match(selector: &Yaml, labels: &Yaml) -> bool {
    let sel = selector.as_hash().expect("selector is a mapping");
    !sel.is_empty() && sel.iter().all(|(k, v)| labels[str_of(k, "label")] == *v)
}

#[test]
fn the_configmap_config_passes_check_config_for_every_role_that_mounts_it() {
    let r = render();
    let procs = processes(&r);
    let roles: Vec<_> = procs.iter().map(|(_, _, p, _)| p.role.clone()).collect();
    assert!(roles.contains(&"ingester".to_owned()), "{roles:?}");
    assert!(roles.contains(&"gateway".to_owned()) || roles.contains(&"distributor".to_owned()), "{roles:?}");
    for (_, _, p, file) in &procs {
        assert_check_config_ok(&p.role, file);
    }
}

#[test]
fn probes_point_at_endpoints_of_the_role_on_its_http_port() {
    let r = render();
    for (_, c, p, _) in processes(&r) {
        let http = container_port(c, "http");
        assert_eq!(
            p.http_port(),
            http,
            "{}: listens on {} but its http containerPort is {http}",
            p.name,
            p.http_listen()
        );
        assert!(
            p.http_listen().starts_with("0.0.0.0:") || p.http_listen().starts_with("[::]:"),
            "{}: listens on {}, which the kubelet's probes cannot reach",
            p.name,
            p.http_listen()
        );
        for (probe, path) in [("livenessProbe", "/-/healthy"), ("readinessProbe", "/-/ready")] {
            let get = &c[probe]["httpGet"];
            assert!(!get.is_badvalue(), "{}: no {probe}.httpGet", p.name);
            let got = str_of(&get["path"], "probe path");
            assert_eq!(got, path, "{}: {probe}", p.name);
            assert!(endpoints(&p.role).contains(&got), "{}: {got} is not an endpoint of {}", p.name, p.role);
            assert_eq!(resolve_port(c, &get["port"]), http, "{}: {probe} port", p.name);
        }
    }
}

#[test]
fn ingester_statefulset_headless_service_and_address_template_agree() {
    let r = render();
    let sts = r.one("StatefulSet", "tessera-ingester");
    let svc_name = str_of(&sts["spec"]["serviceName"], "serviceName");
    let svc = r.one("Service", svc_name);
    assert_eq!(str_of(&svc["spec"]["clusterIP"], "clusterIP"), "None", "{svc_name} must be headless");
    assert!(labels_match(&svc["spec"]["selector"], &sts["spec"]["template"]["metadata"]["labels"]));
    assert!(labels_match(&sts["spec"]["selector"]["matchLabels"], &sts["spec"]["template"]["metadata"]["labels"]));

    let procs = processes(&r);
    let (_, c, p, _) = procs.iter().find(|(w, ..)| std::ptr::eq(*w, sts)).expect("ingester container");
    assert_eq!(p.role, "ingester");
    let cluster = &p.config.cluster;
    let sts_name = str_of(&sts["metadata"]["name"], "name");
    // Membership = the StatefulSet's pods.
    assert_eq!(i64::from(cluster.ingester_count), int_of(&sts["spec"]["replicas"], "replicas"));
    assert!(flag(&p.args, "id").is_none(), "the id must come from the pod name ($HOSTNAME)");
    for (i, e) in cluster.ingesters().iter().enumerate() {
        let pod = format!("{sts_name}-{i}");
        assert_eq!(e.id, pod, "ingester_id_template must give the pod name");
        let (host, _) = e.addr.rsplit_once(':').expect("host:port");
        let expected = format!("{pod}.{svc_name}");
        assert!(
            host == expected || host.starts_with(&format!("{expected}.")),
            "{}: ingester {i}'s address {host} is not its pod's DNS name {expected}[.NAMESPACE.svc...]",
            p.name
        );
        // gRPC: the port the ingester binds = the port peers dial = the container and
        // Service ports.
        let grpc = p.grpc_port(&e.id);
        assert_eq!(grpc, port_of(&e.addr));
        assert_eq!(container_port(c, "grpc"), grpc);
    }
    for sp in list_of(&svc["spec"]["ports"]) {
        let target = resolve_port(c, &sp["targetPort"]);
        assert_eq!(int_of(&sp["port"], "port"), i64::from(target), "{svc_name} port {:?}", sp["name"]);
    }
    let grpc_svc = list_of(&svc["spec"]["ports"]).iter().find(|sp| sp["name"].as_str() == Some("grpc"));
    assert!(grpc_svc.is_some(), "{svc_name} has no grpc port");

    // The data directory is the PersistentVolume.
    let data_dir = p.data_dir();
    let mount = list_of(&c["volumeMounts"])
        .iter()
        .find(|m| m["mountPath"].as_str() == Some(data_dir.as_str()))
        .unwrap_or_else(|| panic!("data_dir {data_dir} is not a volume mount"));
    let claims: Vec<_> = list_of(&sts["spec"]["volumeClaimTemplates"])
        .iter()
        .map(|t| str_of(&t["metadata"]["name"], "claim name"))
        .collect();
    assert!(claims.contains(&str_of(&mount["name"], "mount name")), "data_dir is not on a volumeClaimTemplate");
}

#[test]
fn every_service_selects_one_workload_and_targets_its_ports() {
    let r = render();
    let procs = processes(&r);
    for svc in r.all("Service") {
        let name = str_of(&svc["metadata"]["name"], "name");
        let selected: Vec<_> = procs
            .iter()
            .filter(|(w, ..)| labels_match(&svc["spec"]["selector"], &w["spec"]["template"]["metadata"]["labels"]))
            .collect();
        assert_eq!(selected.len(), 1, "Service {name} must select exactly one workload");
        let (_, c, p, _) = selected[0];
        for sp in list_of(&svc["spec"]["ports"]) {
            let target = resolve_port(c, &sp["targetPort"]);
            assert_eq!(int_of(&sp["port"], "port"), i64::from(target), "Service {name}");
            if sp["name"].as_str() == Some("http") {
                assert_eq!(target, p.http_port(), "Service {name} http → {}", p.name);
            }
        }
    }
}

#[test]
fn disruption_budgets_keep_the_write_quorum_and_select_their_workloads() {
    let r = render();
    let procs = processes(&r);
    let pdbs = r.all("PodDisruptionBudget");
    for (w, _, p, _) in &procs {
        let labels = &w["spec"]["template"]["metadata"]["labels"];
        let mine: Vec<_> =
            pdbs.iter().filter(|b| labels_match(&b["spec"]["selector"]["matchLabels"], labels)).collect();
        assert_eq!(mine.len(), 1, "{} needs exactly one PodDisruptionBudget", p.name);
        if p.role == "ingester" {
            let max_unavailable = int_of(&mine[0]["spec"]["maxUnavailable"], "maxUnavailable");
            assert_eq!(max_unavailable, 1);
            // With that many ingesters out, every shard still has W replicas up.
            let c = &p.config.cluster;
            assert!(
                i64::from(c.replication_factor - c.write_quorum()) >= max_unavailable,
                "RF {} with W {} cannot lose {max_unavailable} replicas",
                c.replication_factor,
                c.write_quorum()
            );
        }
    }
}

#[test]
fn grace_periods_outlast_the_shutdown_timeout() {
    let r = render();
    for (w, _, p, _) in processes(&r) {
        let grace = int_of(&w["spec"]["template"]["spec"]["terminationGracePeriodSeconds"], "grace period");
        let timeout = i64::try_from(p.config.shutdown_timeout_secs).expect("secs");
        assert!(timeout > 0, "{}: shutdown_timeout_secs = 0 waits forever", p.name);
        // The ingester also flushes its heads after the wait.
        let margin = if p.role == "ingester" { 60 } else { 10 };
        assert!(grace >= timeout + margin, "{}: terminationGracePeriodSeconds {grace} < {timeout} + {margin}", p.name);
    }
}

#[test]
fn containers_run_unprivileged_with_resources_and_the_kustomized_image() {
    let r = render();
    let dockerfile = std::fs::read_to_string(repo_root().join("Dockerfile")).expect("Dockerfile");
    let image_uid: i64 = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("USER "))
        .and_then(|u| u.split(':').next())
        .and_then(|u| u.trim().parse().ok())
        .expect("Dockerfile has USER uid:gid");
    for (w, c, p, _) in processes(&r) {
        let pod = &w["spec"]["template"]["spec"];
        assert_eq!(pod["securityContext"]["runAsNonRoot"].as_bool(), Some(true), "{}", p.name);
        assert_eq!(int_of(&pod["securityContext"]["runAsUser"], "runAsUser"), image_uid, "{}", p.name);
        let sc = &c["securityContext"];
        assert_eq!(sc["allowPrivilegeEscalation"].as_bool(), Some(false), "{}", p.name);
        assert_eq!(sc["readOnlyRootFilesystem"].as_bool(), Some(true), "{}", p.name);
        assert_eq!(strings(&sc["capabilities"]["drop"], "drop"), ["ALL"], "{}", p.name);
        for (kind, key) in [("requests", "cpu"), ("requests", "memory"), ("limits", "memory")] {
            assert!(c["resources"][kind][key].as_str().is_some(), "{}: no resources.{kind}.{key}", p.name);
        }
        let image = str_of(&c["image"], "image");
        assert!(r.images.iter().any(|i| i == image), "{}: image {image} is not set by kustomization images", p.name);
    }
    // Everything but the Namespace itself lands in the kustomization's namespace, which
    // namespace.yaml creates.
    assert_eq!(str_of(&r.all("Namespace")[0]["metadata"]["name"], "namespace"), r.namespace);
}

#[test]
fn network_policy_lets_the_gateways_reach_ingester_grpc_and_anyone_scrape_http() {
    let r = render();
    let procs = processes(&r);
    let np = r.one("NetworkPolicy", "tessera-ingester");
    let (ingester, c, ..) = procs.iter().find(|(.., p, _)| p.role == "ingester").expect("ingester");
    assert!(labels_match(
        &np["spec"]["podSelector"]["matchLabels"],
        &ingester["spec"]["template"]["metadata"]["labels"]
    ));
    let rules = list_of(&np["spec"]["ingress"]);
    let rule_for = |port: u16| {
        rules
            .iter()
            .find(|rule| list_of(&rule["ports"]).iter().any(|p| resolve_port(c, &p["port"]) == port))
            .unwrap_or_else(|| panic!("no ingress rule for port {port}"))
    };
    let grpc = rule_for(container_port(c, "grpc"));
    let from = list_of(&grpc["from"]);
    assert!(!from.is_empty(), "gRPC must not be open to every pod");
    for (w, _, p, _) in &procs {
        let labels = &w["spec"]["template"]["metadata"]["labels"];
        let allowed = from.iter().any(|f| labels_match(&f["podSelector"]["matchLabels"], labels));
        assert!(allowed, "{} cannot reach the ingesters' gRPC", p.name);
    }
    assert!(rule_for(container_port(c, "http"))["from"].is_badvalue(), "/metrics must stay scrapeable");
}
