fn main() -> std::process::ExitCode {
    netlab::cli::main()
}
