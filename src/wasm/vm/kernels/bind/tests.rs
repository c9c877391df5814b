//! Binding a small module shaped like the runtime: a bound function reached by a direct call,
//! through the table and as an export, with the host answering "done" or "declined".

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use wasm_encoder::{
    CodeSection, ConstExpr, ElementSection, Elements, EntityType, ExportKind, ExportSection, Function,
    FunctionSection, ImportSection, Instruction, MemorySection, MemoryType, Module, NameMap, NameSection,
    RefType, TableSection, TableType, TypeSection, ValType,
};
use wasmtime::{Engine, Linker, Store, Val};

use super::bind;

/// `dgemm_(13 pointers)` stores 7 at address 0; `caller()` calls it directly and `indirect()`
/// through table slot 0; `env.log` is an import before them all.
fn module() -> Vec<u8> {
    let mut types = TypeSection::new();
    types.ty().function([ValType::I32; 13], []);
    types.ty().function([], []);
    types.ty().function([ValType::I32], []);
    let mut imports = ImportSection::new();
    imports.import("env", "log", EntityType::Function(2));
    let mut functions = FunctionSection::new();
    for t in [0, 1, 1] {
        functions.function(t);
    }
    let mut tables = TableSection::new();
    tables.table(TableType {
        element_type: RefType::FUNCREF,
        minimum: 1,
        maximum: Some(1),
        table64: false,
        shared: false,
    });
    let mut memories = MemorySection::new();
    memories.memory(MemoryType {
        minimum: 1,
        maximum: None,
        memory64: false,
        shared: false,
        page_size_log2: None,
    });
    let mut exports = ExportSection::new();
    exports.export("memory", ExportKind::Memory, 0);
    exports.export("caller", ExportKind::Func, 2);
    exports.export("indirect", ExportKind::Func, 3);
    let mut elements = ElementSection::new();
    elements.active(
        Some(0),
        &ConstExpr::i32_const(0),
        Elements::Functions([1].as_slice().into()),
    );
    let mut code = CodeSection::new();
    let mut dgemm = Function::new([]);
    for i in [
        Instruction::I32Const(0),
        Instruction::I32Const(7),
        Instruction::I32Store(wasm_encoder::MemArg {
            offset: 0,
            align: 2,
            memory_index: 0,
        }),
        Instruction::I32Const(1),
        Instruction::Call(0),
        Instruction::End,
    ] {
        dgemm.instruction(&i);
    }
    code.function(&dgemm);
    let mut caller = Function::new([]);
    for _ in 0..13 {
        caller.instruction(&Instruction::I32Const(0));
    }
    caller.instruction(&Instruction::Call(1));
    caller.instruction(&Instruction::End);
    code.function(&caller);
    let mut indirect = Function::new([]);
    for _ in 0..13 {
        indirect.instruction(&Instruction::I32Const(0));
    }
    indirect.instruction(&Instruction::I32Const(0));
    indirect.instruction(&Instruction::CallIndirect {
        type_index: 0,
        table_index: 0,
    });
    indirect.instruction(&Instruction::End);
    code.function(&indirect);
    let mut names = NameMap::new();
    names.append(0, "log");
    names.append(1, "dgemm_");
    names.append(2, "caller");
    names.append(3, "indirect");
    let mut name_section = NameSection::new();
    name_section.functions(&names);
    let mut m = Module::new();
    m.section(&types)
        .section(&imports)
        .section(&functions)
        .section(&tables)
        .section(&memories);
    m.section(&exports)
        .section(&elements)
        .section(&code)
        .section(&name_section);
    m.finish()
}

/// Runs `export` of the bound module with the host answering `answer`: (host calls, guest
/// calls of its own dgemm_, the word at address 0).
fn run(bound: &[u8], export: &str, answer: i32) -> (u32, u32, i32) {
    let engine = Engine::default();
    let module = wasmtime::Module::new(&engine, bound).expect("the bound module compiles");
    let mut linker: Linker<()> = Linker::new(&engine);
    let (host, own) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let own_seen = own.clone();
    linker
        .func_wrap("env", "log", move |_: i32| {
            own_seen.fetch_add(1, Ordering::SeqCst);
        })
        .expect("log");
    let import = module
        .imports()
        .find(|i| i.module() == "host_kernels")
        .expect("a host_kernels import");
    assert_eq!(import.name(), "dgemm_");
    let wasmtime::ExternType::Func(ty) = import.ty() else {
        panic!("a function import")
    };
    let host_seen = host.clone();
    linker
        .func_new("host_kernels", "dgemm_", ty, move |_, params, results| {
            assert_eq!(params.len(), 13);
            host_seen.fetch_add(1, Ordering::SeqCst);
            results[0] = Val::I32(answer);
            Ok(())
        })
        .expect("host");
    let mut store = Store::new(&engine, ());
    let instance = linker.instantiate(&mut store, &module).expect("instantiate");
    instance
        .get_typed_func::<(), ()>(&mut store, export)
        .expect(export)
        .call(&mut store, ())
        .expect("runs");
    let memory = instance.get_memory(&mut store, "memory").expect("memory");
    let word = i32::from_le_bytes(memory.data(&store)[..4].try_into().expect("4 bytes"));
    (host.load(Ordering::SeqCst), own.load(Ordering::SeqCst), word)
}

#[test]
fn a_bound_function_asks_the_host_first_and_runs_its_own_code_when_declined() {
    let bound = bind(&module()).expect("binds");
    for export in ["caller", "indirect"] {
        assert_eq!(
            run(&bound, export, 1),
            (1, 0, 0),
            "{export}: the host did it; the guest's code did not run"
        );
        assert_eq!(
            run(&bound, export, 0),
            (1, 1, 7),
            "{export}: declined: the guest's own code ran"
        );
    }
}

#[test]
fn a_module_without_blas_is_left_as_it_is() {
    let mut plain = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([], []);
    plain.section(&types);
    let plain = plain.finish();
    assert_eq!(bind(&plain).expect("nothing to bind"), plain);
}
