//! Generates the Fleet API's Rust types from Flower's vendored `.proto` files with a pure-Rust
//! protobuf compiler (protox), so no system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protos = ["proto/flwr/proto/fleet.proto"];
    println!("cargo:rerun-if-changed=proto");
    let descriptors = protox::compile(protos, ["proto"])?;
    prost_build::Config::new().compile_fds(descriptors)?;
    Ok(())
}
