//! Where an experiment's endpoints run, from the names a plan gives
//! (`loopback`/`local`, `netns`/`remote`) and the ends of a run between
//! real hosts (`--from`, `--to`): the agents are reached and authenticated
//! here, before any cell runs, so a wrong key or an unreachable agent is one
//! clear error up front.
//!
//! Between real hosts the 1989 table's words keep their meaning: `local` is
//! both ends on the `to` host, `remote` is `from` to `to`.

use super::processes::ControlError;
use super::remote;
use crate::endpoint::agent::key::{Key, KeyError};
use crate::record::testbed::LinkProfile;
use crate::record::testbed::LinkVia;
use crate::record::testbed::Placement;
use crate::testbed::link::LinkError;
use crate::testbed::netns::has_net_admin;
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PlacementError {
    #[error(
        "{agent} needs the agents' key: --key FILE or NETLAB_KEY_FILE (netlab agent keygen makes one)"
    )]
    NoKey { agent: String },
    #[error(transparent)]
    Key(#[from] KeyError),
    #[error(transparent)]
    Agent(#[from] ControlError),
    #[error("{option} {name} needs CAP_NET_ADMIN (run as root)")]
    NeedsNetAdmin { option: String, name: String },
    #[error("unknown placement \"{name}\" for {option}: expected loopback or netns")]
    Unknown { option: String, name: String },
    #[error(transparent)]
    Link(#[from] LinkError),
}

/// The two ends of a run between real hosts: `local` or an agent's
/// HOST[:PORT] each.
pub type Ends = (String, String);

/// `(from, to)` when either is given (the other is `local`), with every
/// agent among them reached and authenticated now under `key`.
pub fn reach(
    from: Option<&str>,
    to: Option<&str>,
    key: Option<&Path>,
    experiment: &str,
) -> Result<Option<Ends>, PlacementError> {
    if from.is_none() && to.is_none() {
        return Ok(None);
    }
    let from = from.unwrap_or("local").to_string();
    let to = to.unwrap_or("local").to_string();
    let agents: Vec<&String> = [&from, &to]
        .into_iter()
        .filter(|name| name.as_str() != "local")
        .collect();
    if let Some(first) = agents.first() {
        let Some(path) = key else {
            return Err(PlacementError::NoKey {
                agent: first.to_string(),
            });
        };
        remote::configure(Key::load(path)?, experiment);
        for agent in agents {
            remote::link(agent)?;
        }
    }
    Ok(Some((from, to)))
}

/// The placements `names` lists, netns ones over the `link` profile;
/// refused when a netns one cannot be made (no root) or a name or profile is
/// unknown. `option` names the list in errors.
pub fn named(
    option: &str,
    names: &[String],
    link: &str,
    ends: Option<&Ends>,
) -> Result<Vec<Placement>, PlacementError> {
    names
        .iter()
        .map(|name| match (name.as_str(), ends) {
            ("loopback" | "local", Some((_, to))) => Ok(Placement::Remote {
                from: to.clone(),
                to: to.clone(),
            }),
            ("netns" | "remote", Some((from, to))) => Ok(Placement::Remote {
                from: from.clone(),
                to: to.clone(),
            }),
            ("loopback" | "local", None) => Ok(Placement::Loopback),
            ("netns" | "remote", None) => {
                if !has_net_admin() {
                    return Err(PlacementError::NeedsNetAdmin {
                        option: option.into(),
                        name: name.clone(),
                    });
                }
                Ok(Placement::Netns {
                    link: LinkProfile::named(link)?,
                    via: LinkVia::Auto,
                    capture: false,
                    pcap: None,
                    verbose: false,
                })
            }
            (other, _) => Err(PlacementError::Unknown {
                option: option.into(),
                name: other.into(),
            }),
        })
        .collect()
}

/// The placements of an experiment that takes a list (`--placement`):
/// loopback by default, or between real hosts `remote` unless the list
/// asks for `local` too.
pub fn listed(
    names: Option<&[String]>,
    link: &str,
    ends: Option<&Ends>,
) -> Result<Vec<Placement>, PlacementError> {
    let default = [if ends.is_some() { "remote" } else { "loopback" }.to_string()];
    named("--placement", names.unwrap_or(&default), link, ends)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn between_hosts_local_is_both_ends_on_the_to_host() {
        let ends = ("a:5310".to_string(), "b:5310".to_string());
        let placements = named("--p", &names(&["local", "remote"]), "ether10", Some(&ends))
            .expect("names between hosts");
        assert_eq!(
            placements,
            vec![
                Placement::Remote {
                    from: "b:5310".into(),
                    to: "b:5310".into()
                },
                Placement::Remote {
                    from: "a:5310".into(),
                    to: "b:5310".into()
                },
            ]
        );
        assert_eq!(
            listed(None, "ether10", Some(&ends)).expect("default"),
            vec![Placement::Remote {
                from: "a:5310".into(),
                to: "b:5310".into()
            }]
        );
    }

    #[test]
    fn unknown_names_are_refused_naming_the_option() {
        let err = named("--placements", &names(&["moon"]), "ether10", None)
            .expect_err("moon is no placement");
        assert_eq!(
            err.to_string(),
            "unknown placement \"moon\" for --placements: expected loopback or netns"
        );
        assert_eq!(
            listed(None, "ether10", None).expect("default"),
            vec![Placement::Loopback]
        );
    }

    #[test]
    fn an_agent_without_a_key_is_refused_before_connecting() {
        let err = reach(Some("198.51.100.1"), None, None, "stream").expect_err("no key");
        assert!(matches!(err, PlacementError::NoKey { agent } if agent == "198.51.100.1"));
        assert!(
            reach(None, None, None, "stream")
                .expect("no ends")
                .is_none()
        );
    }
}
