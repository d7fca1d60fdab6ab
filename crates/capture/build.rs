/*!
Build script: compiles the QEMU TCG plugin (qemu-plugin/cachecolor_trace.c, declarations in
qemu-plugin/qemu-plugin-api.h) into `$OUT_DIR/cachecolor_trace.so`, which src/qemu.rs embeds
with `include_bytes!` and writes to a temporary file at run time, so nothing depends on install
paths.

The `cc` crate only finds the C compiler (honouring `CC`, `CFLAGS` and the target); the shared
object is linked here with `-shared`, since `cc` itself builds static archives. The plugin's
`qemu_plugin_*` references stay undefined: qemu resolves them against its own exported symbols
when it dlopen()s the plugin.

If the plugin cannot be built (no C compiler, a non-ELF target), the crate still builds: an empty
file is embedded and the `cachecolor_no_qemu_plugin` cfg is set, so the QEMU back end reports
itself unavailable at run time and `Backend::Auto` falls back to Valgrind lackey.
*/
use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(cachecolor_no_qemu_plugin)");
    println!("cargo::rerun-if-changed=qemu-plugin/cachecolor_trace.c");
    println!("cargo::rerun-if-changed=qemu-plugin/qemu-plugin-api.h");
    println!("cargo::rerun-if-env-changed=CC");
    println!("cargo::rerun-if-changed=qemu-plugin/cachecolor_system.c");
    println!("cargo::rerun-if-changed=guest/cc_run.c");
    println!("cargo::rerun-if-changed=qemu-plugin/cachecolor_heap.c");

    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let so = out_dir.join("cachecolor_trace.so");
    let target_os = env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();

    let built = if target_os == "linux" {
        match build_plugin(&so) {
            Ok(()) => true,
            Err(e) => {
                println!("cargo::warning=QEMU trace plugin not built ({e}); the qemu capture back end will be unavailable");
                false
            }
        }
    } else {
        false
    };
    if !built {
        fs::write(&so, b"").expect("write placeholder plugin");
        println!("cargo::rustc-cfg=cachecolor_no_qemu_plugin");
    }
    build_system_parts(&out_dir, target_os == "linux");
    // The guest's heap shim (src/qemu.rs preloads it): for the host's architecture, and only
    // where its system call sequence is written (x86-64, aarch64).
    let heap = out_dir.join("cachecolor_heap.so");
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let heap_built = target_os == "linux"
        && matches!(arch.as_str(), "x86_64" | "aarch64")
        && match compile(
            &heap,
            "qemu-plugin/cachecolor_heap.c",
            &["-shared", "-fPIC", "-fvisibility=hidden", "-Wl,-z,now"],
        ) {
            Ok(()) => true,
            Err(e) => {
                println!("cargo::warning=heap shim not built ({e}); captures will have no heap objects by allocation site");
                false
            }
        };
    if !heap_built {
        fs::write(&heap, b"").expect("write placeholder heap shim");
    }
}

/// Full-system capture (src/system.rs): the system-mode plugin and the guest's static launcher.
/// Either one failing leaves an empty file, which src/system.rs reports as "not built".
fn build_system_parts(out_dir: &std::path::Path, linux: bool) {
    let parts: [(&str, &str, &[&str]); 2] = [
        (
            "cachecolor_system.so",
            "qemu-plugin/cachecolor_system.c",
            &["-shared", "-fPIC", "-fvisibility=hidden", "-Iqemu-plugin"],
        ),
        ("cc_run", "guest/cc_run.c", &["-static"]),
    ];
    for (name, source, flags) in parts {
        let out = out_dir.join(name);
        let result = if linux {
            compile(&out, source, flags)
        } else {
            Err("not a Linux target".into())
        };
        if let Err(e) = result {
            println!(
                "cargo::warning={name} not built ({e}); full-system capture will be unavailable"
            );
            fs::write(&out, b"").expect("write placeholder");
        }
    }
}

fn compile(out: &std::path::Path, source: &str, flags: &[&str]) -> Result<(), String> {
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .try_get_compiler()
        .map_err(|e| format!("no C compiler: {e}"))?;
    let mut cmd = compiler.to_command();
    cmd.args(flags)
        .args(["-O2", "-std=gnu11", "-Wall", "-Wextra", "-o"])
        .arg(out)
        .arg(source);
    let res = cmd
        .output()
        .map_err(|e| format!("cannot run the C compiler: {e}"))?;
    if !res.status.success() {
        return Err(format!(
            "the C compiler failed ({}): {}",
            res.status,
            String::from_utf8_lossy(&res.stderr).trim()
        ));
    }
    for line in String::from_utf8_lossy(&res.stderr).lines() {
        println!("cargo::warning={source}: {line}");
    }
    Ok(())
}

fn build_plugin(so: &PathBuf) -> Result<(), String> {
    let compiler = cc::Build::new()
        .cargo_metadata(false)
        .try_get_compiler()
        .map_err(|e| format!("no C compiler: {e}"))?;
    let mut cmd = compiler.to_command();
    cmd.args([
        "-shared",
        "-fPIC",
        "-O2",
        "-fvisibility=hidden",
        "-std=gnu11",
        "-Wall",
        "-Wextra",
        "-Iqemu-plugin",
        "-o",
    ])
    .arg(so)
    .arg("qemu-plugin/cachecolor_trace.c")
    .arg("-lpthread");
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run the C compiler: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "the C compiler failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    // Surface compiler warnings: the plugin must build clean.
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        println!("cargo::warning=cachecolor_trace.c: {line}");
    }
    Ok(())
}
