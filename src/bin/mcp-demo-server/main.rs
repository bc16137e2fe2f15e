mod server;

fn main() -> std::process::ExitCode {
    server::main_from(std::env::args_os())
}
