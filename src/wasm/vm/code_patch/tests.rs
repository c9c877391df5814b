use super::plan::{Global, Helper, Op, Rewrite};
use super::*;

/// A module like the runtime in the parts that matter: named functions calling each other.
fn module() -> Vec<u8> {
    wat::parse_str(
        r#"(module
             (memory (export "memory") 1)
             (global $kept (mut i32) (i32.const 0))
             (func $PyArray_DescrFromType (param i32) (result i32) local.get 0)
             (func $seven (result i32) i32.const 7)
             (func $pick (export "pick") (param i32) (result i32)
               i32.const 7 call $PyArray_DescrFromType
               local.get 0 i32.const 7 i32.add drop
               i32.const 0 i32.load offset=4000
               i32.add)
           )"#,
    )
    .expect("the test module is valid text")
}

const CALL: Op = Op::Call("PyArray_DescrFromType");

fn rewrite(find: &'static [Op], with: &'static [Op], count: usize) -> Rewrite {
    Rewrite {
        function: "pick",
        find,
        with,
        count,
        why: "a test",
    }
}

/// `wasm` with `rewrites` (and no helpers) applied.
fn apply_rewrites(wasm: &[u8], rewrites: &[Rewrite]) -> Result<Vec<u8>, PatchError> {
    let rewrites: &'static [Rewrite] = Box::leak(rewrites.to_vec().into_boxed_slice());
    apply(
        wasm,
        &Patch {
            globals: &[],
            helpers: &[],
            rewrites,
        },
    )
}

/// Runs the module's `pick` with memory word 4000 = 0 and 4004 = 200.
fn pick(wasm: &[u8]) -> i32 {
    let engine = wasmtime::Engine::default();
    let module = wasmtime::Module::new(&engine, wasm).expect("compiles");
    let mut store = wasmtime::Store::new(&engine, ());
    let instance = wasmtime::Instance::new(&mut store, &module, &[]).expect("instantiates");
    let memory = instance.get_memory(&mut store, "memory").expect("exported");
    memory
        .write(&mut store, 4004, &200i32.to_le_bytes())
        .expect("in bounds");
    let f = instance
        .get_typed_func::<i32, i32>(&mut store, "pick")
        .expect("exported");
    f.call(&mut store, 0).expect("runs")
}

#[test]
fn a_call_argument_is_rewritten_in_place_and_the_rest_kept() {
    let wasm = module();
    assert_eq!(pick(&wasm), 7);
    const FIND: &[Op] = &[Op::I32Const(7), CALL];
    const WITH: &[Op] = &[Op::I32Const(9), CALL];
    let out = apply_rewrites(&wasm, &[rewrite(FIND, WITH, 1)]).expect("rewritten");
    assert_eq!(out.len(), wasm.len(), "same length: nothing else moves");
    assert_eq!(
        pick(&out),
        9,
        "the call now gets 9; the other 7 (an addend) is untouched"
    );
}

#[test]
fn a_shorter_replacement_is_padded_with_nops() {
    const FIND: &[Op] = &[Op::I32Const(7), CALL];
    const WITH: &[Op] = &[Op::I32Const(1)];
    let out = apply_rewrites(&module(), &[rewrite(FIND, WITH, 1)]).expect("rewritten");
    assert_eq!(pick(&out), 1);
}

#[test]
fn a_function_that_differs_is_refused_not_half_rewritten() {
    const FIND: &[Op] = &[Op::I32Const(7)];
    const WITH: &[Op] = &[Op::I32Const(9)];
    let err = apply_rewrites(&module(), &[rewrite(FIND, WITH, 3)]).expect_err("two sevens, not three");
    assert!(err.to_string().contains("not 3"), "{err}");
    assert!(err.to_string().contains("reinstall"), "{err}");
    let missing = Rewrite {
        function: "absent",
        ..rewrite(FIND, WITH, 1)
    };
    let err = apply_rewrites(&module(), &[missing]).expect_err("no such function");
    assert!(err.to_string().contains("absent"), "{err}");
}

#[test]
fn a_longer_replacement_is_a_table_bug() {
    const FIND: &[Op] = &[Op::LocalGet(0)];
    const WITH: &[Op] = &[Op::I32Const(1), Op::LocalGet(0)];
    let err = apply_rewrites(&module(), &[rewrite(FIND, WITH, 1)]).expect_err("does not fit");
    assert!(matches!(err, PatchError::TooLong("pick")), "{err}");
}

#[test]
fn loads_are_matched_by_their_offset() {
    const FIND: &[Op] = &[Op::I32Load(4000)];
    const WITH: &[Op] = &[Op::I32Load(4004)];
    let wasm = module();
    let out = apply_rewrites(&wasm, &[rewrite(FIND, WITH, 1)]).expect("rewritten");
    assert_eq!(out.len(), wasm.len());
    assert_eq!(pick(&out), 207, "the load now reads the other word");
}

#[test]
fn the_compiled_module_is_named_for_these_rewrites() {
    assert!(
        crate::wasm::vm::engine::MODULE_FORM.ends_with(native_ints::VERSION),
        "bump MODULE_FORM with native_ints::VERSION, so no module compiled from other rewrites is loaded"
    );
}

/// A helper appended after the module's functions, with a global of its own, and a call of
/// the module's rewritten to call it.
fn counting(r: &Resolver<'_>) -> Result<wasm_encoder::Function, PatchError> {
    let g = r.global("calls")?;
    let mut f = wasm_encoder::Function::new([(0, wasm_encoder::ValType::I32)]);
    f.instructions()
        .global_get(g)
        .i32_const(1)
        .i32_add()
        .global_set(g)
        .global_get(g)
        .i32_const(100)
        .i32_mul()
        .end();
    Ok(f)
}

#[test]
fn helpers_and_globals_are_appended_and_called() {
    const FIND: &[Op] = &[Op::I32Const(7), CALL];
    const WITH: &[Op] = &[Op::Call("counting")];
    let patch = Patch {
        globals: &[Global { name: "calls" }],
        helpers: &[Helper {
            name: "counting",
            params: &[],
            results: &[wasm_encoder::ValType::I32],
            body: counting,
        }],
        rewrites: &[Rewrite {
            function: "pick",
            find: FIND,
            with: WITH,
            count: 1,
            why: "a test",
        }],
    };
    let out = apply(&module(), &patch).expect("patched");
    let engine = wasmtime::Engine::default();
    let module = wasmtime::Module::new(&engine, &out).expect("compiles");
    let mut store = wasmtime::Store::new(&engine, ());
    let instance = wasmtime::Instance::new(&mut store, &module, &[]).expect("instantiates");
    let f = instance
        .get_typed_func::<i32, i32>(&mut store, "pick")
        .expect("exported");
    assert_eq!(f.call(&mut store, 0).expect("runs"), 100, "the helper ran once");
    assert_eq!(
        f.call(&mut store, 0).expect("runs"),
        200,
        "and kept its count in its global"
    );
}

#[test]
fn a_c_string_is_found_in_the_data() {
    let wasm =
        wat::parse_str(r#"(module (memory 1) (data (i32.const 4096) "x\00__main__\00"))"#).expect("valid");
    let index = ModuleIndex::read(&wasm).expect("reads");
    assert_eq!(index.c_string(&wasm, "__main__"), Some(4098));
    assert_eq!(index.c_string(&wasm, "__name__"), None);
}
