//! `netlab mesh manifests`: the Kubernetes objects that run a mesh on a
//! cluster with nothing but the engine its users already run: a
//! Namespace; a Secret holding the agents' key (with `--key`); a DaemonSet
//! of agents on every node (host network by default, the pod network with
//! `--pod-network`); a headless Service whose name resolves to every ready
//! agent; and a Job (or with `--schedule`, a CronJob) that runs
//! `netlab mesh --agents dns:<service>` and writes to a volume and to
//! stdout. None of it needs RBAC, a service-account token or
//! `kubectl exec`.
//!
//! Written as text from a template (every value set into it is checked or
//! quoted as a JSON string, which YAML reads as the same string), so the
//! file reads as a person would write it; a test checks it against
//! Kubernetes' own schemas and a golden copy
//! (`deploy/kubernetes/netlab.yaml`).

use crate::endpoint::agent::DEFAULT_PORT;
use crate::endpoint::agent::key::Key;
use anyhow::bail;
use base64::Engine;
use std::path::Path;

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
    /// The mesh's `--tests` and `--duration`.
    pub tests: &'a str,
    pub duration: &'a str,
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

/// A JSON string: a YAML double-quoted scalar of the same text.
fn quoted(text: &str) -> String {
    serde_json::to_string(text).expect("a string serializes")
}

/// The manifests as one multi-document YAML text.
pub fn render(cluster: &Cluster<'_>) -> anyhow::Result<String> {
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
    let image = quoted(cluster.image);
    let port = DEFAULT_PORT;
    let service = format!("netlab-agents.{ns}.svc.{}", cluster.cluster_domain);
    let mut yaml = String::new();
    yaml.push_str(&format!(
        "# netlab mesh on Kubernetes: an agent on every node, a headless Service
# naming every ready agent, and a {job} measuring every pair of them.
# Made by `netlab mesh manifests --namespace {ns} --image IMAGE{pod}{cron}`;
# docs/DEPLOY.md walks through it. Nothing here needs RBAC, a
# service-account token or `kubectl exec`.
apiVersion: v1
kind: Namespace
metadata:
  name: {ns}
  labels:
    app.kubernetes.io/part-of: netlab
",
        job = if cluster.schedule.is_some() {
            "CronJob"
        } else {
            "Job"
        },
        pod = if cluster.pod_network {
            " --pod-network"
        } else {
            ""
        },
        cron = if cluster.schedule.is_some() {
            " --schedule ..."
        } else {
            ""
        },
    ));
    match cluster.key {
        Some(path) => {
            let key = Key::load(path)?;
            let data = base64::engine::general_purpose::STANDARD.encode(key.to_text());
            yaml.push_str(&format!(
                "---
# The agents' pre-shared key (`netlab agent keygen`): every agent and the
# mesh hold it; mounted read-only, readable by its owner alone.
apiVersion: v1
kind: Secret
metadata:
  name: netlab-key
  namespace: {ns}
type: Opaque
data:
  agent.key: {data}
"
            ));
        }
        None => yaml.push_str(&format!(
            "---
# The Secret `netlab-key` holds the agents' key; make it apart, so the key
# is in no file but its own:
#   netlab agent keygen --out agent.key
#   kubectl -n {ns} create secret generic netlab-key --from-file=agent.key
"
        )),
    }
    let network = if cluster.pod_network {
        "      # The pod network: the CNI's path between nodes is measured.\n".to_string()
    } else {
        "      # The nodes' own network: what the hosts get, without the CNI.\n      hostNetwork: true\n      dnsPolicy: ClusterFirstWithHostNet\n"
            .to_string()
    };
    // What both pods share: no token, no service links, the default
    // seccomp profile, the key mounted read-only.
    let security = "          securityContext:
            # Secret files belong to root, and netlab reads a key only its
            # owner can read (as ssh does), so the process is uid 0, but
            # with no capability at all: it binds ports above 1024, moves
            # bytes over sockets and starts its own endpoints, and needs
            # none of root's powers for that.
            runAsUser: 0
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: [\"ALL\"]
";
    let key_volume = "        - name: key
          secret:
            secretName: netlab-key
            defaultMode: 0400
";
    yaml.push_str(&format!(
        "---
# An agent on every node. It serves stream, rpc and rpm cells (a mesh's tests)
# to a controller holding the key, one run at a time, on its data ports
# 5311-5350; a pass over N nodes is one run of up to --max-duration.
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: netlab-agent
  namespace: {ns}
  labels:
    app.kubernetes.io/name: netlab-agent
    app.kubernetes.io/part-of: netlab
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: netlab-agent
  template:
    metadata:
      labels:
        app.kubernetes.io/name: netlab-agent
        app.kubernetes.io/part-of: netlab
    spec:
{network}      automountServiceAccountToken: false
      enableServiceLinks: false
      # Every node, tainted or not: a mesh with holes is no mesh.
      tolerations:
        - operator: Exists
      securityContext:
        seccompProfile:
          type: RuntimeDefault
      containers:
        - name: agent
          image: {image}
          args: [\"agent\", \"serve\", \"--listen\", \"0.0.0.0:{port}\", \"--key\", \"/etc/netlab/agent.key\", \"--max-duration\", \"6h\"]
          env:
            # Who the agent is, from the downward API: its node, and the
            # zone and region the node's topology labels give the pod.
            - name: NODE_NAME
              valueFrom:
                fieldRef:
                  fieldPath: spec.nodeName
            - name: NETLAB_LABEL_zone
              valueFrom:
                fieldRef:
                  fieldPath: metadata.labels['topology.kubernetes.io/zone']
            - name: NETLAB_LABEL_region
              valueFrom:
                fieldRef:
                  fieldPath: metadata.labels['topology.kubernetes.io/region']
          ports:
            - name: control
              containerPort: {port}
              protocol: TCP
          # Ready once it accepts on its control port (the probe's bare
          # connection, closed before a byte, is neither refused nor logged).
          readinessProbe:
            tcpSocket:
              port: control
            periodSeconds: 30
          # A request, and no CPU limit: a throttled agent would measure
          # its quota, not the path.
          resources:
            requests:
              cpu: 100m
              memory: 64Mi
            limits:
              memory: 1Gi
{security}          volumeMounts:
            - name: key
              mountPath: /etc/netlab
              readOnly: true
      volumes:
{key_volume}---
# The agents by one name: a headless Service's DNS name resolves to every
# ready agent's address (`netlab mesh --agents dns:{service}`).
apiVersion: v1
kind: Service
metadata:
  name: netlab-agents
  namespace: {ns}
  labels:
    app.kubernetes.io/part-of: netlab
spec:
  clusterIP: None
  selector:
    app.kubernetes.io/name: netlab-agent
  ports:
    - name: control
      port: {port}
      targetPort: control
      protocol: TCP
"
    ));
    let args = format!(
        "[\"mesh\", \"--agents\", {}, \"--key\", \"/etc/netlab/agent.key\", \"--tests\", {}, \"--duration\", {}, \"--json\"]",
        quoted(&format!("dns:{service}:{port}")),
        quoted(cluster.tests),
        quoted(cluster.duration)
    );
    let pod = |indent: &str| {
        let body = format!(
            "metadata:
  labels:
    app.kubernetes.io/name: netlab-mesh
    app.kubernetes.io/part-of: netlab
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  enableServiceLinks: false
  securityContext:
    seccompProfile:
      type: RuntimeDefault
  containers:
    - name: mesh
      image: {image}
      # Each run's directory (manifest, results.jsonl, matrices,
      # report.html) goes to /results; the summary and what the
      # matrices show, to stdout (kubectl logs).
      workingDir: /results
      args: {args}
      resources:
        requests:
          cpu: 100m
          memory: 128Mi
{security_pod}      volumeMounts:
        - name: key
          mountPath: /etc/netlab
          readOnly: true
        - name: results
          mountPath: /results
  volumes:
{key_pod}    # Replace with a persistentVolumeClaim to keep the runs.
    - name: results
      emptyDir: {{}}
",
            security_pod = reindent(security, -4),
            key_pod = reindent(key_volume, -4),
        );
        reindent(&body, indent.len() as i32)
    };
    match cluster.schedule {
        None => yaml.push_str(&format!(
            "---
# One pass over every pair of agents. Apply it once the agents are ready
# (`kubectl apply --selector 'app.kubernetes.io/name!=netlab-mesh'` first,
# then `kubectl rollout status daemonset/netlab-agent`), so its DNS query
# finds every node.
apiVersion: batch/v1
kind: Job
metadata:
  name: netlab-mesh
  namespace: {ns}
  labels:
    app.kubernetes.io/name: netlab-mesh
    app.kubernetes.io/part-of: netlab
spec:
  backoffLimit: 0
  ttlSecondsAfterFinished: 86400
  template:
{}",
            pod("    ")
        )),
        Some(schedule) => yaml.push_str(&format!(
            "---
# A pass over every pair of agents on a schedule, one at a time.
apiVersion: batch/v1
kind: CronJob
metadata:
  name: netlab-mesh
  namespace: {ns}
  labels:
    app.kubernetes.io/name: netlab-mesh
    app.kubernetes.io/part-of: netlab
spec:
  schedule: {}
  concurrencyPolicy: Forbid
  jobTemplate:
    spec:
      backoffLimit: 0
      ttlSecondsAfterFinished: 86400
      template:
{}",
            quoted(schedule),
            pod("        ")
        )),
    }
    Ok(yaml)
}

/// `text` with every non-empty line moved right by `by` spaces (left when
/// negative).
fn reindent(text: &str, by: i32) -> String {
    text.lines()
        .map(|line| {
            if line.is_empty() {
                String::new()
            } else if by >= 0 {
                format!("{}{line}", " ".repeat(by as usize))
            } else {
                line.chars().skip((-by) as usize).collect()
            }
        })
        .map(|line| line + "\n")
        .collect()
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
    }

    #[test]
    fn the_pod_network_and_a_schedule_change_only_what_they_say() {
        let host = render(&cluster()).unwrap();
        assert!(host.contains("hostNetwork: true"));
        assert!(host.contains("kind: Job\n"));
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
        assert!(cron.contains("kind: CronJob") && cron.contains("schedule: \"0 3 * * *\""));
        for yaml in [&host, &pod, &cron] {
            assert!(yaml.contains("dns:netlab-agents.netlab.svc.cluster.local:5310"));
            assert!(yaml.contains("automountServiceAccountToken: false"));
            assert!(!yaml.contains('\t'));
        }
    }
}
