//! A variant of stream (sources 003 and 004): what-ifs as a full factorial over socket and link features; Joy's 1981 ladder and Van Jacobson's leave-one-out as presets. And of rpm: responsiveness's fixes (NOTSENT_LOWAT, buffers, congestion control, the bottleneck's discipline) on the same path (`rpm.rs`).

pub mod cell;
pub mod options;
pub mod report;
pub mod rpm;

/// The ablate experiment, as the registry lists it.
pub struct Ablate;

impl crate::options::experiment::Experiment for Ablate {
    const NAME: &'static str = "ablate";
    type Args = options::AblateArgs;

    fn run(args: Self::Args, out: &mut crate::options::Output) -> anyhow::Result<()> {
        options::run(args, out)
    }

    fn json(args: &Self::Args) -> bool {
        args.json()
    }
}
