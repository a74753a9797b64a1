"""Recover Flower's Fleet API `.proto` files from an installed flwr wheel.

The flwr wheel ships no `.proto` sources, only generated `*_pb2.py` modules that carry each
file's serialized FileDescriptorProto. This script prints those descriptors back as `.proto`
text (comments are not in descriptors and are lost), starting from `fleet.proto` and following
its imports. Run with the pinned flwr installed:

    python3 recover_protos.py flwr/proto    # writes flwr/proto/*.proto
"""

import importlib
import pathlib
import sys

from google.protobuf import descriptor_pb2 as dp

HEADER = """// Recovered from the serialized descriptor in flwr {version}'s flwr/proto/{stem}_pb2.py
// by core/fleet/proto/recover_protos.py. Copyright Flower Labs GmbH, Apache License 2.0
// (see LICENSE in this folder). Comments of the original are not in the descriptor.

"""

SCALARS = {
    dp.FieldDescriptorProto.TYPE_DOUBLE: "double",
    dp.FieldDescriptorProto.TYPE_FLOAT: "float",
    dp.FieldDescriptorProto.TYPE_INT64: "int64",
    dp.FieldDescriptorProto.TYPE_UINT64: "uint64",
    dp.FieldDescriptorProto.TYPE_INT32: "int32",
    dp.FieldDescriptorProto.TYPE_FIXED64: "fixed64",
    dp.FieldDescriptorProto.TYPE_FIXED32: "fixed32",
    dp.FieldDescriptorProto.TYPE_BOOL: "bool",
    dp.FieldDescriptorProto.TYPE_STRING: "string",
    dp.FieldDescriptorProto.TYPE_BYTES: "bytes",
    dp.FieldDescriptorProto.TYPE_UINT32: "uint32",
    dp.FieldDescriptorProto.TYPE_SFIXED32: "sfixed32",
    dp.FieldDescriptorProto.TYPE_SFIXED64: "sfixed64",
    dp.FieldDescriptorProto.TYPE_SINT32: "sint32",
    dp.FieldDescriptorProto.TYPE_SINT64: "sint64",
}


def type_name(f, package):
    if f.type in SCALARS:
        return SCALARS[f.type]
    name = f.type_name.lstrip(".")
    prefix = package + "."
    return name[len(prefix):] if name.startswith(prefix) else name


def field_line(f, package, maps, label=True):
    if f.type_name.lstrip(".") in maps:
        key, value = maps[f.type_name.lstrip(".")]
        return f"map<{type_name(key, package)}, {type_name(value, package)}> {f.name} = {f.number};"
    prefix = ""
    if label and f.label == dp.FieldDescriptorProto.LABEL_REPEATED:
        prefix = "repeated "
    elif label and f.proto3_optional:
        prefix = "optional "
    return f"{prefix}{type_name(f, package)} {f.name} = {f.number};"


def collect_maps(msg, scope, maps):
    for nested in msg.nested_type:
        full = f"{scope}.{nested.name}"
        if nested.options.map_entry:
            maps[full] = (nested.field[0], nested.field[1])
        collect_maps(nested, full, maps)


def print_enum(e, indent, out):
    out.append(f"{indent}enum {e.name} {{")
    for v in e.value:
        out.append(f"{indent}  {v.name} = {v.number};")
    out.append(f"{indent}}}")


def print_message(msg, package, maps, indent, out):
    out.append(f"{indent}message {msg.name} {{")
    inner = indent + "  "
    for e in msg.enum_type:
        print_enum(e, inner, out)
    for nested in msg.nested_type:
        if not nested.options.map_entry:
            print_message(nested, package, maps, inner, out)
    real_oneofs = {}
    for f in msg.field:
        if f.HasField("oneof_index") and not f.proto3_optional:
            real_oneofs.setdefault(f.oneof_index, []).append(f)
    done = set()
    for f in msg.field:
        if f.HasField("oneof_index") and not f.proto3_optional:
            if f.oneof_index in done:
                continue
            done.add(f.oneof_index)
            out.append(f"{inner}oneof {msg.oneof_decl[f.oneof_index].name} {{")
            for g in real_oneofs[f.oneof_index]:
                out.append(f"{inner}  {field_line(g, package, maps, label=False)}")
            out.append(f"{inner}}}")
        else:
            out.append(f"{inner}{field_line(f, package, maps)}")
    out.append(f"{indent}}}")


def render(fd, version):
    stem = pathlib.Path(fd.name).stem
    out = [HEADER.format(version=version, stem=stem).rstrip("\n"), "", f'syntax = "{fd.syntax or "proto2"}";', ""]
    out.append(f"package {fd.package};")
    out.append("")
    for dep in fd.dependency:
        out.append(f'import "{dep}";')
    if fd.dependency:
        out.append("")
    maps = {}
    for msg in fd.message_type:
        collect_maps(msg, f"{fd.package}.{msg.name}", maps)
    for svc in fd.service:
        out.append(f"service {svc.name} {{")
        for m in svc.method:
            out.append(
                f"  rpc {m.name}({type_name_s(m.input_type, fd.package)}) "
                f"returns ({type_name_s(m.output_type, fd.package)}) {{}}"
            )
        out.append("}")
        out.append("")
    for e in fd.enum_type:
        print_enum(e, "", out)
        out.append("")
    for msg in fd.message_type:
        print_message(msg, fd.package, maps, "", out)
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def type_name_s(name, package):
    name = name.lstrip(".")
    return name[len(package) + 1:] if name.startswith(package + ".") else name


def main():
    import flwr

    version = importlib.metadata.version("flwr")
    target = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "flwr/proto")
    target.mkdir(parents=True, exist_ok=True)
    todo, seen = ["flwr/proto/fleet.proto"], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        module = importlib.import_module(name[:-6].replace("/", ".") + "_pb2")
        fd = dp.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(fd)
        (target / pathlib.Path(name).name).write_text(render(fd, version))
        todo.extend(fd.dependency)
    print(f"flwr {version}: wrote {', '.join(sorted(seen))}")


if __name__ == "__main__":
    import importlib.metadata

    main()
