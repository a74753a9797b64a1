"""Write objects.json: Flower's own object ids and bytes for a few messages (flwr 1.42.0).

The Rust tests (core/fleet/tests/objects.rs, signing.rs) check that torchlet-fleet builds the
same bytes and ids and decodes Flower's. Chunks are set to 64 bytes (Flower's
FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE, 5 MiB by default) so that arrays span several chunks, some
of them identical. Run from this folder with flwr==1.42.0 installed:

    FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE=64 python3 make_fixture.py
    python3 make_fixture.py --verify PUBLIC_KEY_PEM_B64 TIMESTAMP SIGNATURE_B64
"""

import base64
import json
import os
import sys

import numpy as np
from cryptography.hazmat.primitives.asymmetric import ec

from flwr.app import Array, ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
from flwr.app.error import Error
from flwr.supercore.inflatable.inflatable_object import get_all_nested_objects
from flwr.supercore.task_identity import TaskIdentity
from flwr.supercore.primitives.asymmetric import (
    bytes_to_public_key,
    generate_key_pairs,
    private_key_to_bytes,
    public_key_to_bytes,
    sign_message,
    verify_signature,
)


def fix_metadata(msg, message_type, **extra):
    """Fixed metadata (as a SuperLink would have set it), then the message id from its object."""
    fields = {"run_id": 7, "src_node_id": 1, "dst_node_id": 1234567890123, "group_id": "3"}
    fields.update(ttl=3600.5, created_at=1764620000.25, message_type=message_type, **extra)
    msg.metadata.__dict__.update({f"_{k}": v for k, v in fields.items()})
    msg.metadata.__dict__["_message_id"] = msg.object_id
    return msg


def objects(msg):
    nested = get_all_nested_objects(msg)
    return [
        {"id": oid, "class": type(obj).__name__, "hex": obj.deflate().hex()}
        for oid, obj in nested.items()
    ]


def case(name, msg):
    return {"name": name, "message_id": msg.object_id, "objects": objects(msg)}


def main():
    assert os.environ.get("FLWR_PRIVATE_MAX_ARRAY_CHUNK_SIZE") == "64", "set the chunk size to 64"
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 7, 1, 11
    arrays = {
        "conv.weight": np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2) / 7.0,
        "conv.bias": np.array([0.5, -1.25], dtype=np.float32),
        "bn.num_batches_tracked": np.array(3, dtype=np.int64),
        "bn2.num_batches_tracked": np.array(3, dtype=np.int64),
        "zeros": np.zeros(64, dtype=np.float32),
        "head.weight": np.linspace(-1, 1, 6, dtype=np.float64).reshape(3, 2),
    }
    config = ConfigRecord({"lr": 0.05, "momentum": 0.9, "local-steps": 5, "batch-size": 8, "name": "é"})
    train = Message(
        RecordDict({"arrays": ArrayRecord({k: Array(v) for k, v in arrays.items()}), "config": config}),
        dst_node_id=1234567890123,
        message_type="train",
    )
    fix_metadata(train, "train")
    metrics = MetricRecord({"num-examples": 40, "train-loss": 0.6931471805599453})
    reply = Message(RecordDict({"arrays": ArrayRecord({"conv.bias": Array(arrays["conv.bias"]), "bias.é": Array(arrays["bn.num_batches_tracked"])}), "metrics": metrics}), dst_node_id=1, message_type="train")
    fix_metadata(reply, "train")
    error = Message(Error(code=0, reason="array conv.bias: shape [3] where the model has [2]"), reply_to=train)
    fix_metadata(error, "train", reply_to_message_id=train.object_id, src_node_id=1234567890123, dst_node_id=1)

    key, public = generate_key_pairs()
    timestamp = "2026-12-01T21:30:00.123456+00:00"
    signature = sign_message(key, timestamp.encode("ascii"))
    out = {
        "flwr": "1.42.0",
        "chunk_size": 64,
        "cases": [case("train", train), case("reply", reply), case("error", error)],
        "signature": {
            "private_key_pem": private_key_to_bytes(key).decode(),
            "public_key_pem": public_key_to_bytes(public).decode(),
            "timestamp": timestamp,
            "signature_b64": base64.b64encode(signature).decode(),
        },
    }
    with open("objects.json", "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


def verify(public_b64, timestamp, signature_b64):
    public = bytes_to_public_key(base64.b64decode(public_b64))
    assert isinstance(public.curve, ec.SECP384R1)
    ok = verify_signature(public, timestamp.encode("ascii"), base64.b64decode(signature_b64))
    print("valid" if ok else "INVALID")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--verify":
        verify(*sys.argv[2:])
    else:
        main()
