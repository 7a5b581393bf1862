//! Compiles the .proto files with protox (pure Rust; no system protoc).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "netdiv/v1/sut_node.proto";
    println!("cargo:rerun-if-changed={proto}");
    let fds = protox::compile([proto], ["."])?;
    // `bytes` fields as `Bytes`: a sample goes from the QSL's memory into a
    // message without a copy.
    tonic_prost_build::configure().bytes(".").compile_fds(fds)?;
    Ok(())
}
