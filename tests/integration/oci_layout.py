#!/usr/bin/env python3
"""Writes an OCI image layout from files on this machine, for the image tests.

  oci_layout.py DIR busybox          busybox-static as /bin/busybox, its applets
                                      as links, Env/WorkingDir/Cmd in the config
  oci_layout.py DIR busybox-user USER the same with User in its config
  oci_layout.py DIR python3           this machine's python3, its standard library and
                                      the libraries ldd names, in one uncompressed layer
  oci_layout.py DIR mcp               the python3 image and a layer with an MCP stdio
                                      server (mcp/image_server.py), its Entrypoint
  oci_layout.py DIR node             this machine's node, the libraries ldd names and
                                      (a Debian-built node's) the builtins it keeps as files
  oci_layout.py DIR node-mcp         the node image and a layer with an MCP stdio
                                      server in plain JavaScript (mcp/image_server.js),
                                      its Entrypoint
  oci_layout.py FILE docker-archive [bad]
                                      the busybox image as `docker save` writes it
                                      (bad: the config's name is not its digest)
  oci_layout.py DIR evil KIND        a layer that tries to leave the root (KIND:
                                      dotdot, symlink, hardlink) or breaks the rules
                                      of the store (KIND: mediatype, mismatch)
The manifest's digest is printed.
"""
import gzip
import hashlib
import io
import json
import os
import re
import sys
import tarfile


def blob(layout, data):
    digest = hashlib.sha256(data).hexdigest()
    os.makedirs(os.path.join(layout, "blobs", "sha256"), exist_ok=True)
    with open(os.path.join(layout, "blobs", "sha256", digest), "wb") as f:
        f.write(data)
    return digest


def tar_bytes(add):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        add(t)
    return buf.getvalue()


def add_file(t, name, data, mode=0o644, **kw):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    for k, v in kw.items():
        setattr(info, k, v)
    t.addfile(info, io.BytesIO(data))


def add_special(t, name, kind, target="", mode=0o755):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    info.mode = mode
    t.addfile(info)


def busybox_layer(t):
    for d in ("bin", "etc", "tmp", "home", "srv"):
        add_special(t, d, tarfile.DIRTYPE)
    with open("/bin/busybox", "rb") as f:
        add_file(t, "bin/busybox", f.read(), 0o4755)  # set-uid: must be dropped
    for applet in ("sh", "ls", "cat", "echo", "touch", "id", "pwd", "wget", "env", "true",
                   "stat", "mkdir", "rm", "sleep"):
        add_special(t, "bin/" + applet, tarfile.SYMTYPE, "busybox")
    add_file(t, "etc/passwd", b"root:x:0:0::/root:/bin/sh\nsandbox:x:1000:1000::/work:/bin/sh\n"
             b"app:x:2345:2346::/work:/bin/sh\n")
    add_file(t, "etc/group", b"root:x:0:\napp:x:2346:\nstaff:x:50:\n")
    add_file(t, "etc/os-release", b"NAME=tollgate-test-busybox\n")
    add_special(t, "etc/resolv.conf", tarfile.SYMTYPE, "/run/elsewhere/resolv.conf")
    add_file(t, "srv/gone", b"removed by the next layer\n")
    add_file(t, "srv/kept", b"kept\n")
    add_special(t, "srv/hard", tarfile.LNKTYPE, "srv/kept")
    add_special(t, "dev/null", tarfile.CHRTYPE)


def second_layer(t):
    add_special(t, "srv/.wh.gone", tarfile.REGTYPE)
    add_file(t, "srv/added", b"second layer\n")


def write(layout, layers, config, layer_type="application/vnd.oci.image.layer.v1.tar+gzip",
          mismatch=False):
    descs = []
    diff_ids = []
    for raw in layers:
        data = gzip.compress(raw, mtime=0) if layer_type.endswith("+gzip") else raw
        d = blob(layout, data)
        diff_ids.append("sha256:" + hashlib.sha256(raw).hexdigest())
        descs.append({"mediaType": layer_type, "digest": "sha256:" + d, "size": len(data)})
    config["rootfs"] = {"type": "layers", "diff_ids": diff_ids}
    cdata = json.dumps(config).encode()
    c = blob(layout, cdata)
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                           "digest": "sha256:" + c, "size": len(cdata)},
                "layers": descs}
    mdata = json.dumps(manifest).encode()
    m = blob(layout, mdata)
    if mismatch:  # a layer whose bytes are not what its digest says
        with open(os.path.join(layout, "blobs", "sha256", descs[-1]["digest"][7:]), "ab") as f:
            f.write(b"tampered")
    index = {"schemaVersion": 2, "manifests": [
        {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": "sha256:" + m,
         "size": len(mdata), "annotations": {"org.opencontainers.image.ref.name": "latest"},
         "platform": {"os": "linux", "architecture": "amd64"}}]}
    with open(os.path.join(layout, "index.json"), "w") as f:
        json.dump(index, f)
    with open(os.path.join(layout, "oci-layout"), "w") as f:
        f.write('{"imageLayoutVersion": "1.0.0"}')
    print("sha256:" + m)


SKIP_STDLIB = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3",
               "pydoc_data", "dist-packages", "site-packages"}


def ldd_libs(paths):
    """The shared libraries ldd names for each of paths (the loader among them)."""
    import subprocess
    libs = set()
    for f in paths:
        out = subprocess.run(["ldd", f], capture_output=True, text=True).stdout
        for line in out.splitlines():
            parts = line.split()
            path = parts[2] if len(parts) > 2 and parts[1] == "=>" else parts[0]
            if path.startswith("/"):
                libs.add(path)
    return libs


def host_files(t, files, libs):
    """files and libs of this machine's, with the directories on their way,
    as they are here (a symlink and its target both)."""
    added = set()

    def add_path(p):
        # Directories on the way, then the file (a symlink's target too).
        parts = p.strip("/").split("/")
        for i in range(1, len(parts)):
            d = "/".join(parts[:i])
            if d not in added:
                added.add(d)
                if os.path.islink("/" + d):
                    add_special(t, d, tarfile.SYMTYPE, os.readlink("/" + d))
                else:
                    add_special(t, d, tarfile.DIRTYPE)
        rel = "/".join(parts)
        if rel in added:
            return
        added.add(rel)
        if os.path.islink(p):
            add_special(t, rel, tarfile.SYMTYPE, os.readlink(p))
            target = os.path.join(os.path.dirname(p), os.readlink(p))
            add_path(os.path.normpath(target))
        else:
            with open(p, "rb") as f:
                add_file(t, rel, f.read(), os.stat(p).st_mode & 0o777)

    # Real paths first (a merged /usr's /lib is a symlink to usr/lib, which a
    # layer cannot write through before usr/lib exists), the host's top-level
    # symlinks (/lib, /lib64, /bin, /sbin) last.
    for lib in sorted(libs):  # the name ldd gave (a symlink, as ld.so's) and its target
        add_path(os.path.join(os.path.realpath(os.path.dirname(lib)), os.path.basename(lib)))
    for f in sorted(files):
        add_path(os.path.realpath(f))
    if "etc" not in added:
        add_special(t, "etc", tarfile.DIRTYPE)
    for top in ("lib", "lib64", "bin", "sbin"):
        if os.path.islink("/" + top):
            add_special(t, top, tarfile.SYMTYPE, os.readlink("/" + top))


def python3_layer(t):
    import glob
    exe = os.path.realpath("/usr/bin/python3")
    ver = os.path.basename(exe)  # python3.11
    stdlib = os.path.join("/usr/lib", ver)
    files = {exe}
    for root, dirs, names in os.walk(stdlib):
        dirs[:] = [d for d in dirs if d not in SKIP_STDLIB and not d.startswith("config-")]
        files.update(os.path.join(root, n) for n in names)
    libs = ldd_libs([exe] + glob.glob(os.path.join(stdlib, "lib-dynload", "*.so")))
    host_files(t, files, libs)
    add_special(t, "usr/bin/python3", tarfile.SYMTYPE, ver)


def node_layer(t):
    # This machine's node and the libraries ldd names; no npm, no node
    # modules of the host's. A Debian-built node keeps a few of its own
    # builtins (acorn, cjs-module-lexer, undici's fetch) outside itself, as
    # files under /usr/share/nodejs that its libnode names, and aborts at
    # start without them: those go in too. It reads the CA bundle at start.
    exe = os.path.realpath("/usr/bin/node")
    libs = ldd_libs([exe])
    files = {exe}
    for f in [exe] + [lib for lib in libs if os.path.basename(lib).startswith("libnode.")]:
        with open(f, "rb") as fh:
            for m in re.finditer(rb"/usr/share/nodejs/[\w.@/-]+\.js", fh.read()):
                if os.path.isfile(m.group().decode()):
                    files.add(m.group().decode())
    if os.path.isfile("/etc/ssl/certs/ca-certificates.crt"):
        files.add("/etc/ssl/certs/ca-certificates.crt")
    host_files(t, files, libs)
    if exe != "/usr/bin/node":
        add_special(t, "usr/bin/node", tarfile.SYMTYPE, exe)


def docker_archive(path, config, bad):
    layers = [tar_bytes(busybox_layer), tar_bytes(second_layer)]
    names = []
    with tarfile.open(path, "w") as t:
        for raw in layers:
            d = hashlib.sha256(raw).hexdigest()
            add_file(t, d + "/layer.tar", raw)
            names.append(d + "/layer.tar")
        config["rootfs"] = {"type": "layers",
                            "diff_ids": ["sha256:" + hashlib.sha256(r).hexdigest() for r in layers]}
        cdata = json.dumps(config).encode()
        cname = hashlib.sha256(cdata + (b"x" if bad else b"")).hexdigest() + ".json"
        add_file(t, cname, cdata)
        add_file(t, "manifest.json", json.dumps(
            [{"Config": cname, "RepoTags": ["archived/busybox:7"], "Layers": names}]).encode())


def main():
    layout, kind = sys.argv[1], sys.argv[2]
    config = {"architecture": "amd64", "os": "linux",
              "config": {"Env": ["PATH=/bin", "IMAGE_GREETING=from-the-image"],
                         "WorkingDir": "/srv", "Cmd": ["/bin/cat", "/etc/os-release"]}}
    if kind == "docker-archive":
        docker_archive(layout, config, len(sys.argv) > 3)
        return
    os.makedirs(layout, exist_ok=True)
    if kind == "busybox":
        write(layout, [tar_bytes(busybox_layer), tar_bytes(second_layer)], config)
        return
    if kind == "busybox-user":  # the busybox image whose config names a User
        config["config"]["User"] = sys.argv[3]
        write(layout, [tar_bytes(busybox_layer), tar_bytes(second_layer)], config)
        return
    if kind == "python3":
        config["config"] = {"Env": ["PATH=/usr/bin"], "Cmd": ["/usr/bin/python3"]}
        write(layout, [tar_bytes(python3_layer)], config, "application/vnd.oci.image.layer.v1.tar")
        return
    if kind in ("node", "node-mcp"):
        config["config"] = {"Env": ["PATH=/usr/bin", "IMAGE_GREETING=from-the-node-image"],
                            "Cmd": ["/usr/bin/node"]}
        layers = [tar_bytes(node_layer)]
        if kind == "node-mcp":
            # the node image with an MCP server of the test's as its Entrypoint
            here = os.path.dirname(os.path.abspath(__file__))
            with open(os.path.join(here, "mcp", "image_server.js"), "rb") as f:
                server = f.read()
            config["config"] = {"Env": config["config"]["Env"], "WorkingDir": "/srv",
                                "Entrypoint": ["/usr/bin/node", "/srv/image_server.js"]}

            def server_layer(t):
                add_special(t, "srv", tarfile.DIRTYPE)
                add_file(t, "srv/image_server.js", server)
            layers.append(tar_bytes(server_layer))
        write(layout, layers, config, "application/vnd.oci.image.layer.v1.tar")
        return
    if kind == "mcp":
        # the python3 image with an MCP server of the test's as its Entrypoint
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "mcp", "image_server.py"), "rb") as f:
            server = f.read()
        config["config"] = {"Env": ["PATH=/usr/bin", "IMAGE_GREETING=from-the-image"],
                            "WorkingDir": "/srv",
                            "Entrypoint": ["/usr/bin/python3", "/srv/image_server.py"]}

        def server_layer(t):
            add_special(t, "srv", tarfile.DIRTYPE)
            add_file(t, "srv/image_server.py", server)
        write(layout, [tar_bytes(python3_layer), tar_bytes(server_layer)], config,
              "application/vnd.oci.image.layer.v1.tar")
        return
    evil = sys.argv[3]
    if evil == "dotdot":
        layer = tar_bytes(lambda t: add_file(t, "../../escaped", b"out\n"))
    elif evil == "symlink":
        def add(t):
            add_special(t, "up", tarfile.SYMTYPE, "/tmp")
            add_file(t, "up/escaped", b"out\n")
        layer = tar_bytes(add)
    elif evil == "hardlink":
        layer = tar_bytes(lambda t: add_special(t, "passwd", tarfile.LNKTYPE, "../../../etc/passwd"))
    elif evil == "truncated":
        layer = tar_bytes(busybox_layer)[:70000]
    else:  # mismatch: a layer of its own, whose stored bytes are then changed
        layer = tar_bytes(lambda t: add_file(t, "srv/mismatch", b"tampered later\n"))
    layer_type = "application/vnd.oci.image.layer.v1.tar+gzip"
    if evil == "mediatype":
        layer_type = "application/vnd.example.layer.v1.tar+lz4"
    write(layout, [tar_bytes(busybox_layer), layer], config, layer_type,
          mismatch=evil == "mismatch")


main()
