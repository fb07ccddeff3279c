#!/usr/bin/env python3
"""Static checks of docker/ (no Docker engine needed): both compose files against the Compose
Specification's JSON schema plus cross-references (services, mounted files, build contexts, the
load balancer's upstreams), and the Dockerfile's shape (multi-stage, non-root runtime user)."""
import json
import pathlib
import re
import sys

import jsonschema
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
errors = []


def fail(message):
    errors.append(message)


def check_compose(path, schema):
    spec = yaml.safe_load(path.read_text())
    validator = jsonschema.Draft7Validator(schema)
    for error in validator.iter_errors(spec):
        fail(f"{path.name}: {'/'.join(map(str, error.path))}: {error.message}")
    services = spec.get("services", {})
    for name, service in services.items():
        depends = service.get("depends_on", [])
        for dep in depends if isinstance(depends, list) else depends.keys():
            if dep not in services:
                fail(f"{path.name}: {name} depends on unknown service {dep}")
        for volume in service.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume.get("source", "")
            if source.startswith("."):
                if not (path.parent / source).exists():
                    fail(f"{path.name}: {name} mounts missing file {source}")
            elif source not in spec.get("volumes", {}):
                fail(f"{path.name}: {name} uses undeclared volume {source}")
        build = service.get("build")
        if build:
            context = path.parent / build["context"]
            if not (context / build["dockerfile"]).exists():
                fail(f"{path.name}: {name} builds from missing {build['dockerfile']}")
    return spec


def check_threadql_services(path, spec):
    """threadql services reach MongoDB with transactions (a replica set or mongos)."""
    for name, service in spec["services"].items():
        env = service.get("environment", {})
        uri = env.get("THREADQL_MONGODB_URI")
        if uri is None:
            continue
        if "replicaSet=" not in uri and "mongos" not in uri:
            fail(f"{path.name}: {name} connects to {uri}, which is neither a replica set nor a mongos")


def check_sharded(spec):
    services = spec["services"]
    replicas = [n for n, s in services.items() if s.get("environment", {}).get("THREADQL_JWT_SECRET")]
    if len(replicas) < 2:
        fail(f"compose.sharded.yml: expected two threadql replicas, found {replicas}")
    conf = (DOCKER / "nginx.conf").read_text()
    upstreams = re.findall(r"server\s+([\w-]+):8080;", conf)
    if sorted(upstreams) != sorted(replicas):
        fail(f"nginx.conf upstreams {upstreams} are not the threadql replicas {replicas}")
    if "Upgrade" not in conf:
        fail("nginx.conf does not pass WebSocket upgrades (subscriptions)")
    commands = [" ".join(s.get("command", [])) for s in services.values() if isinstance(s.get("command"), list)]
    if not any("shard-setup" in c for c in commands):
        fail("compose.sharded.yml: no service runs `threadql shard-setup`")
    for role in ["--configsvr", "--shardsvr"]:
        if not any(role in c for c in commands):
            fail(f"compose.sharded.yml: no mongod with {role}")
    shards = [c for c in commands if "--shardsvr" in c]
    if len(shards) < 2:
        fail("compose.sharded.yml: expected two shard replica sets")


def check_dockerfile(path):
    lines = [l.strip() for l in path.read_text().splitlines() if l.strip() and not l.strip().startswith("#")]
    stages = [l for l in lines if l.upper().startswith("FROM ")]
    if len(stages) < 2:
        fail("Dockerfile: expected a multi-stage build (a build stage and a runtime stage)")
    final = lines[lines.index(stages[-1]):]
    users = [l.split(None, 1)[1] for l in final if l.upper().startswith("USER ")]
    if not users or users[-1].split(":")[0] in ("0", "root"):
        fail("Dockerfile: the runtime stage must run as a non-root USER")
    if not any(l.upper().startswith("COPY --FROM=") for l in final):
        fail("Dockerfile: the runtime stage should copy only the built binary from the build stage")
    if any(l.upper().startswith("ADD ") and "://" in l for l in lines):
        fail("Dockerfile: ADD of a URL (use a pinned download in the build stage)")
    if not any(l.upper().startswith(("ENTRYPOINT", "CMD")) for l in final):
        fail("Dockerfile: no ENTRYPOINT/CMD in the runtime stage")
    if "--locked" not in path.read_text():
        fail("Dockerfile: build with --locked so the image uses Cargo.lock")


def main():
    schema = json.loads((DOCKER / "schema" / "compose-spec.json").read_text())
    for name in ["compose.yml", "compose.sharded.yml"]:
        path = DOCKER / name
        spec = check_compose(path, schema)
        check_threadql_services(path, spec)
        if name == "compose.sharded.yml":
            check_sharded(spec)
    check_dockerfile(DOCKER / "Dockerfile")
    if errors:
        print("docker/ checks failed:\n  " + "\n  ".join(errors), file=sys.stderr)
        sys.exit(1)
    print("docker/: compose files match the Compose Specification; Dockerfile is multi-stage and non-root")


if __name__ == "__main__":
    main()
