#!/usr/bin/env python3
"""Turns bench/run.py's results.json into results.md and PNG plots.

    bench/report.py RESULTS_DIR... [--update-readme]

With --update-readme, the Results section of README.md shows every run
given (e.g. bench/results/host and bench/results/vm).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "..", "README.md")
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def fmt_bytes(n):
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def cell(result, key, kind="s"):
    if result is None:
        return "-"
    if "failed" in result:
        return "failed"
    value = result.get(key)
    if value is None:
        return "-"
    if kind == "s":
        return f"{value * 1000:.0f} ms" if value < 10 else f"{value:.1f} s"
    if kind == "bytes":
        return fmt_bytes(value)
    if kind == "us":
        return f"{value:.1f} µs" if value < 1000 else f"{value / 1000:.1f} ms"
    if kind == "mib":
        return f"{value:.0f} MiB/s"
    return str(value)


def ratio(a, b):
    return f"{a / b:.2f}×" if a and b else "-"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def failures(results):
    out = []
    for name, workloads in results.items():
        for workload, r in workloads.items():
            if isinstance(r, dict) and "failed" in r:
                out.append(f"- {name}, {workload}: {r['failed']}")
    return out


def link_sentence(env):
    link = env.get("link")
    if not link:
        return ""
    return (f"  Through the emulated WAN link {link['name']} ({link['rtt_ms']:g} ms RTT, "
            f"{link['rate_mbit']:g} Mbit/s) to HTTPS + HTTP/2 origins: divide a time by "
            f"{link['rtt_ms'] / 1000:g} s for round trips.")


def markdown(data):
    env, res = data["environment"], data["results"]
    names = [n for n in res if n != "curl"]
    get = lambda n, w: res.get(n, {}).get(w)  # noqa: E731
    out = [f"Measured {env['date']} on {env['where']} (kernel {env['kernel']}, "
           f"{env['cpus']} CPUs{', virtualised' if env['virtualised'] else ''}); "
           f"median of {data['repeat']} runs.  Cold: fresh mount, empty cache, dropped page "
           f"cache.  Warm: the same again.{link_sentence(env)}", ""]
    out.append("**The demo**: `tar tvf linux-6.1.tar | head -20` (1.3 GB tar) and "
               "`xz -dc linux-6.1.tar.xz | tar tv | head -5`")
    out.append("")
    out.append(table(["", "tar head cold", "fetched", "warm", "fetched", "xz head cold",
                      "fetched", "warm", "fetched"],
                     [[n] + [cell(get(n, w), key, unit) for w in ("tar-head", "xz-head")
                             for key, unit in (("cold_seconds", "s"), ("cold_bytes", "bytes"),
                                               ("warm_seconds", "s"), ("warm_bytes", "bytes"))]
                      for n in names]))
    out += ["", "Bytes are those of nginx's access log, which logs a request when it ends: "
            "a peer that keeps a streaming GET open (rclone) has its bytes counted in the "
            "run in which it closes it."]
    out += ["", "**Metadata**: first byte of a never-listed file 5 directories deep; "
            "`ls -l` of 5,000 files (requests sent)", ""]
    out.append(table(["", "deep cold", "ls exact cold", "requests", "ls rounded cold",
                      "requests", "ls warm"],
                     [[n, cell(get(n, "deep-first-byte"), "cold_seconds"),
                       cell(get(n, "ls-5000-exact"), "cold_seconds"),
                       cell(get(n, "ls-5000-exact"), "cold_requests", "n"),
                       cell(get(n, "ls-5000-rounded"), "cold_seconds"),
                       cell(get(n, "ls-5000-rounded"), "cold_requests", "n"),
                       cell(get(n, "ls-5000-exact"), "warm_seconds")] for n in names]))
    local = get("local", "read-1-threads") or {}
    curl = get("curl", "read-1-threads") or {}
    out += ["", "**Reads** of the 1.3 GB tar, one reader: 4 KiB random preads and sequential "
            "1 MiB reads; ratios against the local file and curl from the same run", ""]
    rows = []
    for n in names:
        r = get(n, "read-1-threads")
        ok = r and "failed" not in r
        rows.append([n, cell(r, "cold_rand_p50_us", "us"), cell(r, "cold_rand_p99_us", "us"),
                     cell(r, "warm_rand_p50_us", "us"), cell(r, "warm_rand_p99_us", "us"),
                     ratio(r.get("warm_rand_p50_us"), local.get("warm_rand_p50_us")) if ok else "-",
                     cell(r, "cold_seq_mib_s", "mib"),
                     ratio(r.get("cold_seq_mib_s"), curl.get("cold_seq_mib_s")) if ok else "-",
                     cell(r, "warm_seq_mib_s", "mib"),
                     ratio(r.get("warm_seq_mib_s"), local.get("warm_seq_mib_s")) if ok else "-"])
    out.append(table(["", "cold p50", "cold p99", "warm p50", "warm p99", "warm p50 / local",
                      "cold seq", "/ curl", "warm seq", "/ local"], rows))
    for n in names:
        r = get(n, "read-1-threads") or {}
        if r.get("native_warm_seq_mib_s"):
            out += ["", f"{n}, warm, against the same file read directly in the cache "
                    f"(no mount in the way; alternating mount and cache file, median of 3 "
                    f"pairs): 4 KiB random p50 "
                    f"{ratio(r['paired_warm_rand_p50_us'], r['native_warm_rand_p50_us'])} "
                    f"of its latency, sequential "
                    f"{ratio(r['paired_warm_seq_mib_s'], r['native_warm_seq_mib_s'])} "
                    f"of its throughput."]
    out += ["", f"curl of the same file: {cell(curl, 'cold_seq_mib_s', 'mib')} to /dev/null, "
            f"{cell(curl, 'to_file_mib_s', 'mib')} into a file on the caches' file system"]
    for n in names:
        r = get(n, "read-1-threads") or {}
        if n.startswith("httphsm") and "failed" not in r and curl.get("to_file_mib_s"):
            out[-1] += (f"; {n} cold = {ratio(r.get('cold_seq_mib_s'), curl['to_file_mib_s'])}"
                        " of the latter")
    out[-1] += "."
    if "QEMU" in env["where"]:
        out += ["", "In the guest, `local` is the host's tree through a 9p share (what nginx "
                "serves): it is no native reference there; for fanotify mode the cache file "
                "read directly is."]
    out += ["",
            "**Concurrent readers** (warm): 4 KiB random p50 and sequential throughput", ""]
    rows = []
    for n in names:
        row = [n]
        for t in (1, 4, 16):
            r = get(n, f"read-{t}-threads")
            row += [cell(r, "warm_rand_p50_us", "us"), cell(r, "warm_seq_mib_s", "mib")]
        rows.append(row)
    out.append(table(["", "1: p50", "1: seq", "4: p50", "4: seq", "16: p50", "16: seq"], rows))
    failed = failures(res)
    if failed:
        out += ["", "Failures:", ""] + failed
    return "\n".join(out) + "\n"


def plots(data, out_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = data["results"]
    names = [n for n in res if n not in ("curl",)]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))

    def values(workload, key):
        vals = []
        for n in names:
            r = res[n].get(workload) or {}
            vals.append(r.get(key) if "failed" not in r else None)
        return vals

    def bars(ax, vals, title, unit, log=False):
        shown = [v if v else 0 for v in vals]
        ax.bar(range(len(names)), shown, color=["#4c72b0" if v else "#cccccc" for v in vals])
        for i, v in enumerate(vals):
            ax.text(i, max(shown) * 0.02 if not log else 1, "failed" if v is None else "",
                    ha="center", rotation=90, fontsize=8)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(unit)
        if log:
            ax.set_yscale("log")

    bars(axes[0], [v / 1048576 if v is not None else None
                   for v in values("tar-head", "cold_bytes")],
         "tar tvf | head -20: bytes fetched (cold)", "MiB", log=True)
    bars(axes[1], values("read-1-threads", "warm_rand_p50_us"),
         "warm 4 KiB random read, p50", "µs", log=True)
    bars(axes[2], values("read-1-threads", "cold_seq_mib_s"),
         "cold sequential read", "MiB/s")
    fig.subplots_adjust(bottom=0.28, wspace=0.3)
    path = os.path.join(out_dir, "bench.png")
    fig.savefig(path, dpi=90)
    return path


def update_readme(runs):
    """runs: (markdown, plot path, results dir) of each run, in order."""
    with open(README) as f:
        text = f.read()
    parts = [f"{BEGIN}\n_Generated by `bench/report.py --update-readme` from the runs below._\n"]
    for md, plot, out_dir in runs:
        rel_plot = os.path.relpath(plot, os.path.dirname(README))
        rel_md = os.path.relpath(os.path.join(out_dir, "results.md"), os.path.dirname(README))
        parts.append(f"\n### {os.path.basename(out_dir)} ([tables]({rel_md}))\n\n"
                     f"![benchmark]({rel_plot})\n\n{md}")
    section = "".join(parts) + END
    if BEGIN in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text += "\n## Results\n\n" + section + "\n"
    with open(README, "w") as f:
        f.write(text)


def main():
    dirs = [a for a in sys.argv[1:] if not a.startswith("--")]
    runs = []
    for out_dir in dirs:
        with open(os.path.join(out_dir, "results.json")) as f:
            data = json.load(f)
        md = markdown(data)
        with open(os.path.join(out_dir, "results.md"), "w") as f:
            f.write(md)
        runs.append((md, plots(data, out_dir), out_dir))
        print(md)
    if "--update-readme" in sys.argv:
        update_readme(runs)


if __name__ == "__main__":
    main()
