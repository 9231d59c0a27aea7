//! `netlab mesh manifests`: the Kubernetes objects that run a mesh on a
//! cluster with nothing but the engine its users already run: a
//! Namespace; a Secret holding the agents' key (with `--key`); a DaemonSet
//! of agents on every node (host network by default, the pod network with
//! `--pod-network`), each serving its own metrics; a headless Service whose
//! name resolves to every ready agent; and the controller: a Job (or with
//! `--schedule`, a CronJob) that runs `netlab mesh --agents dns:<service>`
//! for `--passes` passes, or with `--continuous` a Deployment of one that
//! probes every pair every `--every` and serves Prometheus metrics. Pods
//! that serve metrics carry Prometheus' scrape annotations. None of it
//! needs RBAC, a service-account token or `kubectl exec`.
//!
//! Built from the Kubernetes API's own types (`k8s-openapi`, API 1.33)
//! and serialized to YAML, a comment before each object saying what it is
//! for; a test checks the result against Kubernetes' own schemas (1.25 and
//! the newest the validator carries) and golden copies
//! (`deploy/kubernetes/netlab.yaml`, `netlab-continuous.yaml`).

use crate::endpoint::agent::DEFAULT_PORT;
use crate::endpoint::agent::key::Key;
use crate::export::Export;
use crate::export::yaml::Documents;
use anyhow::bail;
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::{
    DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec, DeploymentStrategy,
};
use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, Job, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, Namespace, ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec,
    Probe, ResourceRequirements, SeccompProfile, Secret, SecretVolumeSource, SecurityContext,
    Service, ServicePort, ServiceSpec, TCPSocketAction, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;
use std::path::Path;

/// The port the continuous controller serves its metrics on.
pub const CONTROLLER_METRICS_PORT: u16 = 9464;
/// The port each agent serves its own metrics on.
pub const AGENT_METRICS_PORT: u16 = 9465;

/// The continuous controller's settings.
#[derive(Debug, Clone)]
pub struct Continuous<'a> {
    /// `--every`.
    pub every: &'a str,
    /// `--stream-every`, if the throughput pass runs.
    pub stream_every: Option<&'a str>,
}

/// The sampled fleet's settings: agents probing their own peer lists,
/// a controller reading their summaries (`netlab mesh watch`).
#[derive(Debug, Clone)]
pub struct Sampled<'a> {
    /// The agents' `--probe-every` and the controller's `--every`.
    pub every: &'a str,
    /// `--probe-rate`, calls a second.
    pub rate: f64,
    /// `--probe-seed`.
    pub seed: u64,
}

/// What the manifests are made for.
#[derive(Debug, Clone)]
pub struct Cluster<'a> {
    pub namespace: &'a str,
    pub image: &'a str,
    /// The agents on the pods' network (the CNI's path) instead of the
    /// nodes' own.
    pub pod_network: bool,
    /// The key to hold in the Secret (none: the Secret is made apart).
    pub key: Option<&'a Path>,
    /// A CronJob's schedule instead of a one-off Job.
    pub schedule: Option<&'a str>,
    pub cluster_domain: &'a str,
    /// The mesh's `--tests`, `--duration` and `--passes`.
    pub tests: &'a str,
    pub duration: &'a str,
    pub passes: usize,
    /// The controller as a long-running Deployment instead.
    pub continuous: Option<Continuous<'a>>,
    /// Or agents probing their own peer lists and a controller reading them.
    pub sampled: Option<Sampled<'a>>,
}

/// A DNS-1123 label, as a namespace's name must be.
fn check_label(what: &str, name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if !ok {
        bail!(
            "{what} {name:?}: give a DNS label (at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit)"
        );
    }
    Ok(())
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// `app.kubernetes.io/name: NAME` and `part-of: netlab`.
fn app(name: &str) -> BTreeMap<String, String> {
    labels(&[
        ("app.kubernetes.io/name", name),
        ("app.kubernetes.io/part-of", "netlab"),
    ])
}

fn meta(name: &str, namespace: &str, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        labels: Some(labels),
        ..ObjectMeta::default()
    }
}

/// Prometheus' scrape annotations (its `kubernetes_sd` pod role reads them
/// in the common relabelling examples).
fn scrape(port: u16) -> BTreeMap<String, String> {
    labels(&[
        ("prometheus.io/scrape", "true"),
        ("prometheus.io/port", &port.to_string()),
        ("prometheus.io/path", "/metrics"),
    ])
}

fn quantity(text: &str) -> Quantity {
    Quantity(text.into())
}

fn port(name: &str, number: u16) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: i32::from(number),
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    }
}

/// Secret files belong to root, and netlab reads a key only its owner can
/// read (as ssh does), so the process is uid 0, but with no capability at
/// all: it binds ports above 1024, moves bytes over sockets and starts its
/// own endpoints, and needs none of root's powers for that.
fn container_security() -> SecurityContext {
    SecurityContext {
        run_as_user: Some(0),
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            ..Capabilities::default()
        }),
        ..SecurityContext::default()
    }
}

/// No token, no service links, the default seccomp profile.
fn pod_spec(containers: Vec<Container>, volumes: Vec<Volume>) -> PodSpec {
    PodSpec {
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        security_context: Some(PodSecurityContext {
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".into(),
                ..SeccompProfile::default()
            }),
            ..PodSecurityContext::default()
        }),
        containers,
        volumes: Some(volumes),
        ..PodSpec::default()
    }
}

/// The key, readable by its owner alone (mode 0400).
fn key_volume() -> Volume {
    Volume {
        name: "key".into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some("netlab-key".into()),
            default_mode: Some(0o400),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}

fn key_mount() -> VolumeMount {
    VolumeMount {
        name: "key".into(),
        mount_path: "/etc/netlab".into(),
        read_only: Some(true),
        ..VolumeMount::default()
    }
}

/// A scratch volume for run directories (a persistentVolumeClaim keeps
/// them).
fn results_volume() -> (Volume, VolumeMount) {
    (
        Volume {
            name: "results".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        },
        VolumeMount {
            name: "results".into(),
            mount_path: "/results".into(),
            ..VolumeMount::default()
        },
    )
}

fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn daemon_set(cluster: &Cluster<'_>) -> DaemonSet {
    let ns = cluster.namespace;
    let listen = format!("0.0.0.0:{DEFAULT_PORT}");
    let metrics = format!("0.0.0.0:{AGENT_METRICS_PORT}");
    let mut args = strings(&[
        "agent",
        "serve",
        "--listen",
        &listen,
        "--key",
        "/etc/netlab/agent.key",
        "--max-duration",
        "6h",
        "--metrics",
        &metrics,
    ]);
    let mut env = vec![
        field_env("NODE_NAME", "spec.nodeName"),
        field_env(
            "NETLAB_LABEL_zone",
            "metadata.labels['topology.kubernetes.io/zone']",
        ),
        field_env(
            "NETLAB_LABEL_region",
            "metadata.labels['topology.kubernetes.io/region']",
        ),
    ];
    let mut ports = vec![
        port("control", DEFAULT_PORT),
        port("metrics", AGENT_METRICS_PORT),
    ];
    if let Some(sampled) = &cluster.sampled {
        // Its peers from the headless Service's DNS; itself by its pod's
        // address (Kubernetes expands $(POD_IP) from the variable above).
        args.extend(strings(&[
            "--probe-peers",
            &agents_name(cluster),
            "--probe-every",
            sampled.every,
            "--probe-rate",
            &sampled.rate.to_string(),
            "--probe-seed",
            &sampled.seed.to_string(),
        ]));
        env.push(field_env("POD_IP", "status.podIP"));
        env.push(EnvVar {
            name: "NETLAB_PROBE_AS".into(),
            value: Some(format!("$(POD_IP):{DEFAULT_PORT}")),
            ..EnvVar::default()
        });
        let mut probe = port("probe", DEFAULT_PORT);
        probe.protocol = Some("UDP".into());
        ports.push(probe);
    }
    let agent = Container {
        name: "agent".into(),
        image: Some(cluster.image.into()),
        args: Some(args),
        env: Some(env),
        ports: Some(ports),
        readiness_probe: Some(Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::String("control".into()),
                ..TCPSocketAction::default()
            }),
            period_seconds: Some(30),
            ..Probe::default()
        }),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".into(), quantity("100m")),
                ("memory".into(), quantity("64Mi")),
            ])),
            limits: Some(BTreeMap::from([("memory".into(), quantity("1Gi"))])),
            ..ResourceRequirements::default()
        }),
        security_context: Some(container_security()),
        volume_mounts: Some(vec![key_mount()]),
        ..Container::default()
    };
    let mut spec = PodSpec {
        tolerations: Some(vec![Toleration {
            operator: Some("Exists".into()),
            ..Toleration::default()
        }]),
        ..pod_spec(vec![agent], vec![key_volume()])
    };
    if !cluster.pod_network {
        spec.host_network = Some(true);
        spec.dns_policy = Some("ClusterFirstWithHostNet".into());
    }
    DaemonSet {
        metadata: meta("netlab-agent", ns, app("netlab-agent")),
        spec: Some(DaemonSetSpec {
            selector: LabelSelector {
                match_labels: Some(labels(&[("app.kubernetes.io/name", "netlab-agent")])),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(app("netlab-agent")),
                    annotations: Some(scrape(AGENT_METRICS_PORT)),
                    ..ObjectMeta::default()
                }),
                spec: Some(spec),
            },
            ..DaemonSetSpec::default()
        }),
        ..DaemonSet::default()
    }
}

fn service(cluster: &Cluster<'_>) -> Service {
    Service {
        metadata: meta(
            "netlab-agents",
            cluster.namespace,
            labels(&[("app.kubernetes.io/part-of", "netlab")]),
        ),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".into()),
            selector: Some(labels(&[("app.kubernetes.io/name", "netlab-agent")])),
            ports: Some(vec![ServicePort {
                name: Some("control".into()),
                port: i32::from(DEFAULT_PORT),
                target_port: Some(IntOrString::String("control".into())),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The controller's container: `netlab mesh ARGS`, its run directories
/// under /results.
fn controller(cluster: &Cluster<'_>, args: Vec<String>, ports: Vec<ContainerPort>) -> Container {
    let (_, results_mount) = results_volume();
    Container {
        name: "mesh".into(),
        image: Some(cluster.image.into()),
        working_dir: Some("/results".into()),
        args: Some(args),
        ports: (!ports.is_empty()).then_some(ports),
        resources: Some(ResourceRequirements {
            requests: Some(BTreeMap::from([
                ("cpu".into(), quantity("100m")),
                ("memory".into(), quantity("128Mi")),
            ])),
            ..ResourceRequirements::default()
        }),
        security_context: Some(container_security()),
        volume_mounts: Some(vec![key_mount(), results_mount]),
        ..Container::default()
    }
}

fn agents_name(cluster: &Cluster<'_>) -> String {
    format!(
        "dns:netlab-agents.{}.svc.{}:{DEFAULT_PORT}",
        cluster.namespace, cluster.cluster_domain
    )
}

/// The one-off (or scheduled) pass: a Job's pod template.
fn pass_template(cluster: &Cluster<'_>) -> PodTemplateSpec {
    let passes = cluster.passes.to_string();
    let args = strings(&[
        "mesh",
        "--agents",
        &agents_name(cluster),
        "--key",
        "/etc/netlab/agent.key",
        "--tests",
        cluster.tests,
        "--duration",
        cluster.duration,
        "--passes",
        &passes,
        "--json",
    ]);
    let (results, _) = results_volume();
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(app("netlab-mesh")),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            restart_policy: Some("Never".into()),
            ..pod_spec(
                vec![controller(cluster, args, Vec::new())],
                vec![key_volume(), results],
            )
        }),
    }
}

fn job_spec(cluster: &Cluster<'_>) -> JobSpec {
    JobSpec {
        backoff_limit: Some(0),
        ttl_seconds_after_finished: Some(86_400),
        template: pass_template(cluster),
        ..JobSpec::default()
    }
}

fn deployment(cluster: &Cluster<'_>, continuous: &Continuous<'_>) -> Deployment {
    let metrics = format!("0.0.0.0:{CONTROLLER_METRICS_PORT}");
    let mut args = strings(&[
        "mesh",
        "--agents",
        &agents_name(cluster),
        "--key",
        "/etc/netlab/agent.key",
        "--every",
        continuous.every,
        "--metrics",
        &metrics,
        "--out",
        "/results/continuous",
        "--keep",
        "100",
    ]);
    if let Some(period) = continuous.stream_every {
        args.extend(strings(&[
            "--stream-every",
            period,
            "--tests",
            cluster.tests,
            "--duration",
            cluster.duration,
        ]));
    }
    let mut container = controller(
        cluster,
        args,
        vec![port("metrics", CONTROLLER_METRICS_PORT)],
    );
    container.readiness_probe = Some(Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/metrics".into()),
            port: IntOrString::String("metrics".into()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(30),
        ..Probe::default()
    });
    let (results, _) = results_volume();
    Deployment {
        metadata: meta(
            "netlab-mesh-continuous",
            cluster.namespace,
            app("netlab-mesh-continuous"),
        ),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            // Never two controllers at once: an agent serves one run at a
            // time, and a second would find them all busy.
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                ..DeploymentStrategy::default()
            }),
            selector: LabelSelector {
                match_labels: Some(labels(&[(
                    "app.kubernetes.io/name",
                    "netlab-mesh-continuous",
                )])),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(app("netlab-mesh-continuous")),
                    annotations: Some(scrape(CONTROLLER_METRICS_PORT)),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod_spec(vec![container], vec![key_volume(), results])),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

/// The sampled fleet's controller: `netlab mesh watch`, all the time.
fn watch_deployment(cluster: &Cluster<'_>, sampled: &Sampled<'_>) -> Deployment {
    let metrics = format!("0.0.0.0:{CONTROLLER_METRICS_PORT}");
    let args = strings(&[
        "mesh",
        "watch",
        "--agents",
        &agents_name(cluster),
        "--key",
        "/etc/netlab/agent.key",
        "--every",
        sampled.every,
        "--metrics",
        &metrics,
        "--out",
        "/results",
    ]);
    let mut container = controller(
        cluster,
        args,
        vec![port("metrics", CONTROLLER_METRICS_PORT)],
    );
    container.readiness_probe = Some(Probe {
        http_get: Some(HTTPGetAction {
            path: Some("/metrics".into()),
            port: IntOrString::String("metrics".into()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(30),
        ..Probe::default()
    });
    let (results, _) = results_volume();
    let name = "netlab-mesh-watch";
    Deployment {
        metadata: meta(name, cluster.namespace, app(name)),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels(&[("app.kubernetes.io/name", name)])),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(app(name)),
                    annotations: Some(scrape(CONTROLLER_METRICS_PORT)),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod_spec(vec![container], vec![key_volume(), results])),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

/// Refuses what Kubernetes or the mesh would refuse, by its option.
fn check(cluster: &Cluster<'_>) -> anyhow::Result<()> {
    let ns = cluster.namespace;
    check_label("--namespace", ns)?;
    for domain_label in cluster.cluster_domain.split('.') {
        check_label("--cluster-domain", domain_label)?;
    }
    if cluster.image.is_empty()
        || cluster
            .image
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
    {
        bail!(
            "--image {:?}: give an image reference (no spaces)",
            cluster.image
        );
    }
    if let Some(schedule) = cluster.schedule
        && schedule.split_whitespace().count() != 5
    {
        bail!("--schedule {schedule:?}: give a cron schedule of five fields, e.g. \"0 3 * * *\"");
    }
    if cluster.sampled.is_some() && (cluster.continuous.is_some() || cluster.schedule.is_some()) {
        bail!(
            "--sampled runs its own controller all the time; give it without --continuous or --schedule"
        );
    }
    if let Some(sampled) = &cluster.sampled
        && !(sampled.rate.is_finite() && sampled.rate > 0.0)
    {
        bail!(
            "--probe-rate {}: a rate of calls a second above 0",
            sampled.rate
        );
    }
    if cluster.continuous.is_some() && cluster.schedule.is_some() {
        bail!("--continuous and --schedule: a continuous controller runs all the time; give one");
    }
    if cluster.passes == 0 || cluster.passes > crate::experiments::mesh::record::MAX_PASSES {
        bail!(
            "--passes {}: give 1 to {}",
            cluster.passes,
            crate::experiments::mesh::record::MAX_PASSES
        );
    }
    Ok(())
}

/// The manifests as one multi-document YAML text.
pub fn render(cluster: &Cluster<'_>) -> anyhow::Result<String> {
    check(cluster)?;
    let ns = cluster.namespace;
    let controller = match (&cluster.continuous, cluster.schedule) {
        _ if cluster.sampled.is_some() => {
            "a Deployment reading the summaries of agents that probe their own peers"
        }
        (Some(_), _) => "a Deployment probing every pair all the time",
        (None, Some(_)) => "a CronJob measuring every pair",
        (None, None) => "a Job measuring every pair",
    };
    let mut made = format!("netlab mesh manifests --namespace {ns} --image IMAGE");
    if cluster.pod_network {
        made.push_str(" --pod-network");
    }
    if cluster.schedule.is_some() {
        made.push_str(" --schedule ...");
    }
    if let Some(c) = &cluster.continuous {
        made.push_str(&format!(" --continuous --every {}", c.every));
    }
    if let Some(c) = &cluster.sampled {
        made.push_str(&format!(
            " --sampled --every {} --probe-rate {}",
            c.every, c.rate
        ));
    }
    let mut docs = Documents::default();
    docs.push(
        &format!(
            "netlab mesh on Kubernetes: an agent on every node, a headless Service\nnaming every ready agent, and {controller}.\nMade by `{made}` from the Kubernetes API's own types\n(k8s-openapi, API 1.33); docs/DEPLOY.md walks through it. Nothing here\nneeds RBAC, a service-account token or `kubectl exec`."
        ),
        &Namespace {
            metadata: ObjectMeta {
                name: Some(ns.into()),
                labels: Some(labels(&[("app.kubernetes.io/part-of", "netlab")])),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        },
    )?;
    match cluster.key {
        Some(path) => {
            let key = Key::load(path)?;
            docs.push(
                "The agents' pre-shared key (`netlab agent keygen`): every agent and the\nmesh hold it; mounted read-only, readable by its owner alone.",
                &Secret {
                    metadata: meta(
                        "netlab-key",
                        ns,
                        labels(&[("app.kubernetes.io/part-of", "netlab")]),
                    ),
                    type_: Some("Opaque".into()),
                    data: Some(BTreeMap::from([(
                        "agent.key".into(),
                        ByteString(key.to_text().into_bytes()),
                    )])),
                    ..Secret::default()
                },
            )?;
        }
        None => docs.push_note(&[
            "The Secret `netlab-key` holds the agents' key; make it apart, so the key",
            "is in no file but its own:",
            "  netlab agent keygen --out agent.key",
            &format!("  kubectl -n {ns} create secret generic netlab-key --from-file=agent.key"),
        ]),
    }
    docs.push(
        &format!(
            "An agent on every node{}. It serves stream, rpc and rpm cells (a mesh's\ntests) to a controller holding the key, one run at a time, on its data\nports 5311-5350; a pass over N nodes is one run of up to --max-duration.\nTolerates every taint (a mesh with holes is no mesh); its node, zone and\nregion from the downward API; ready once it accepts on its control port;\na CPU request and no CPU limit (a throttled agent would measure its\nquota, not the path); its own metrics on port {AGENT_METRICS_PORT}, with Prometheus'\nscrape annotations; the key mounted read-only, mode 0400 (256).",
            if cluster.pod_network {
                ", on the pod network (the CNI's path between nodes is measured)"
            } else {
                ", on the node's own network (what the hosts get, without the CNI)"
            }
        ),
        &daemon_set(cluster),
    )?;
    docs.push(
        &format!(
            "The agents by one name: a headless Service's DNS name resolves to every\nready agent's address (`netlab mesh --agents {}`).",
            agents_name(cluster)
        ),
        &service(cluster),
    )?;
    match (&cluster.continuous, cluster.schedule) {
        _ if let Some(sampled) = &cluster.sampled => docs.push(
            &format!(
                "The controller of a sampled fleet (`netlab mesh watch`): each agent probes\nits own peer list every {} (its rack, samples of its zone and of the\nothers, within {} calls a second, from the Service's DNS and a shared\nseed; no API server calls) and keeps summaries; this reads them every\ncycle with a fixed pool of threads and names hosts and racks in trouble.\nOne line a cycle in /results/watch.jsonl; its aggregates and findings as\nPrometheus metrics on port {CONTROLLER_METRICS_PORT} (scrape annotations). If it stops,\nthe agents go on probing and serving their own metrics.",
                sampled.every, sampled.rate
            ),
            &watch_deployment(cluster, sampled),
        )?,
        (Some(continuous), _) => docs.push(
            &format!(
                "The controller, all the time: every pair probed every {} within the probe\nbudget{}, each cycle's directory under /results/continuous (the\nnewest 100 kept), Prometheus metrics on port {CONTROLLER_METRICS_PORT} (scrape\nannotations; deploy/prometheus/netlab-rules.yml holds the alert rules).\nOne replica, recreated rather than rolled: agents serve one run at a time.",
                continuous.every,
                continuous
                    .stream_every
                    .map_or(String::new(), |p| format!(", throughput every {p}"))
            ),
            &deployment(cluster, continuous),
        )?,
        (None, None) => docs.push(
            "Every pair of agents measured, --passes times. Apply it once the agents\nare ready (`kubectl apply --selector 'app.kubernetes.io/name!=netlab-mesh'`\nfirst, then `kubectl rollout status daemonset/netlab-agent`), so its DNS\nquery finds every node. Each run's directory (manifest, results.jsonl,\nmatrices, report.html) goes to /results (an emptyDir: a\npersistentVolumeClaim keeps them); the summary, to stdout (kubectl logs).",
            &Job {
                metadata: meta("netlab-mesh", ns, app("netlab-mesh")),
                spec: Some(job_spec(cluster)),
                ..Job::default()
            },
        )?,
        (None, Some(schedule)) => docs.push(
            "Every pair of agents measured on a schedule, one run at a time\n(concurrencyPolicy Forbid).",
            &CronJob {
                metadata: meta("netlab-mesh", ns, app("netlab-mesh")),
                spec: Some(CronJobSpec {
                    schedule: schedule.into(),
                    concurrency_policy: Some("Forbid".into()),
                    job_template: JobTemplateSpec {
                        spec: Some(job_spec(cluster)),
                        ..JobTemplateSpec::default()
                    },
                    ..CronJobSpec::default()
                }),
                ..CronJob::default()
            },
        )?,
    }
    Ok(docs.render()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster() -> Cluster<'static> {
        Cluster {
            namespace: "netlab",
            image: "ghcr.io/example/netlab:0.1.0",
            pod_network: false,
            key: None,
            schedule: None,
            cluster_domain: "cluster.local",
            tests: "stream,rtt,loss",
            duration: "10s",
            passes: 1,
            continuous: None,
            sampled: None,
        }
    }

    #[test]
    fn bad_names_images_and_schedules_are_refused_by_name() {
        let refused = |c: Cluster<'_>| render(&c).unwrap_err().to_string();
        assert!(
            refused(Cluster {
                namespace: "Net_Lab",
                ..cluster()
            })
            .contains("--namespace")
        );
        assert!(
            refused(Cluster {
                image: "a b",
                ..cluster()
            })
            .contains("--image")
        );
        assert!(
            refused(Cluster {
                schedule: Some("daily"),
                ..cluster()
            })
            .contains("--schedule")
        );
        assert!(
            refused(Cluster {
                cluster_domain: "cluster..local",
                ..cluster()
            })
            .contains("--cluster-domain")
        );
        assert!(
            refused(Cluster {
                passes: 0,
                ..cluster()
            })
            .contains("--passes")
        );
    }

    #[test]
    fn the_pod_network_a_schedule_and_continuous_change_only_what_they_say() {
        let host = render(&cluster()).unwrap();
        assert!(host.contains("hostNetwork: true"));
        assert!(host.contains("kind: Job\n"));
        assert!(host.contains("- --passes\n"), "{host}");
        let pod = render(&Cluster {
            pod_network: true,
            ..cluster()
        })
        .unwrap();
        assert!(!pod.contains("hostNetwork"));
        let cron = render(&Cluster {
            schedule: Some("0 3 * * *"),
            ..cluster()
        })
        .unwrap();
        assert!(cron.contains("kind: CronJob") && cron.contains("schedule: 0 3 * * *"));
        let continuous = render(&Cluster {
            continuous: Some(Continuous {
                every: "30s",
                stream_every: Some("1h"),
            }),
            ..cluster()
        })
        .unwrap();
        assert!(continuous.contains("kind: Deployment"), "{continuous}");
        assert!(!continuous.contains("kind: Job"));
        assert!(
            continuous.contains("prometheus.io/port: '9464'"),
            "{continuous}"
        );
        for yaml in [&host, &pod, &cron, &continuous] {
            assert!(yaml.contains("dns:netlab-agents.netlab.svc.cluster.local:5310"));
            assert!(yaml.contains("automountServiceAccountToken: false"));
            assert!(yaml.contains("prometheus.io/scrape: 'true'"), "{yaml}");
            assert!(!yaml.contains('\t'));
        }
    }
}
