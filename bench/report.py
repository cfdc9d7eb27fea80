#!/usr/bin/env python3
"""Turns bench/run.py's results.json into results.md and PNG plots.

    bench/report.py RESULTS_DIR... [--update-readme]

For each link measured (loopback, W1, W2) it writes one set of tables into
RESULTS_DIR/results.md and one plot, RESULTS_DIR/bench-LINK.png, where each
contender has the same colour in every plot.  On a WAN link each time
figure is also given in round trips (time / RTT), cold figures beside their
physical floor (bench/run.py FLOORS) and their ratio to it, and sequential
throughput as a fraction of the link's rate.  results.json files written
before run.py measured several links in one run are read as one link.

With --update-readme, the Results section of README.md shows every run
given (e.g. bench/results/host and bench/results/vm).
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(HERE, "..", "README.md")
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
MIB = 1 << 20
# One colour per contender, the same in every plot (matplotlib's tab10).
COLOURS = {"local": "#7f7f7f", "curl": "#17becf", "httphsm-fuse": "#1f77b4",
           "httphsm-fanotify": "#2ca02c", "httpdirfs": "#9467bd", "rclone-off": "#ff7f0e",
           "rclone-full": "#d62728"}
# Which floor of run.py's FLOORS a cold time figure is held against.
RAND_FLOOR = "cold-rand"
# Contenders that do not use the link: no ratio to a floor or to the link's
# rate for them (their times in round trips show what the command costs).
OFF_LINK = {"local"}


class Link:
    """What the cells of one link's tables need to know about the link."""

    def __init__(self, section):
        link = section.get("link") or {}
        self.name = link.get("name", "none")
        self.rtt = link["rtt_ms"] / 1000 if link else None
        self.rate_mbit = link.get("rate_mbit")
        self.rate_mib = link.get("rate_mib_s") or (
            self.rate_mbit * 1e6 / 8 / MIB if self.rate_mbit else None)
        self.span = section.get("seq_span_bytes")
        self.floors = section.get("floors", {})
        self.listing_bytes = section.get("listing_bytes", {})

    @property
    def wan(self):
        return self.rtt is not None

    def title(self):
        if not self.wan:
            return "loopback (no link): plain HTTP"
        return (f"{self.name}: {self.rtt * 1000:g} ms RTT, {self.rate_mbit:g} Mbit/s "
                f"({self.rate_mib:.2f} MiB/s), HTTPS + HTTP/2")

    def floor(self, key):
        return (self.floors.get(key) or {}).get("rtt")


def sections(data):
    """(link name, section) of each link in results.json, old format too."""
    if "links" in data:
        return list(data["links"].items())
    link = data["environment"].get("link")
    return [(link["name"] if link else "none", {"link": link, "results": data["results"]})]


def fmt_bytes(n):
    if n is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def fmt_seconds(value):
    return f"{value * 1000:.0f} ms" if value < 10 else f"{value:.1f} s"


def fmt_us(value):
    return f"{value:.1f} µs" if value < 1000 else f"{value / 1000:.1f} ms"


def fmt_rtt(rtts):
    if rtts < 0.01:
        return "<0.01 RTT"
    return f"{rtts:.2f} RTT" if rtts < 10 else f"{rtts:.0f} RTT"


def value_of(result, key):
    """(value, None) or (None, what the cell shows instead)."""
    if result is None:
        return None, "-"
    if "failed" in result:
        return None, "failed"
    value = result.get(key)
    return (value, None) if value is not None else (None, "-")


def cell(result, key, kind="s", link=None):
    """A figure; on a WAN link, times (kind s or us) also in round trips."""
    value, instead = value_of(result, key)
    if instead:
        return instead
    if kind in ("s", "us"):
        seconds = value if kind == "s" else value / 1e6
        text = fmt_seconds(value) if kind == "s" else fmt_us(value)
        return f"{text} = {fmt_rtt(seconds / link.rtt)}" if link and link.wan else text
    if kind == "bytes":
        return fmt_bytes(value)
    if kind == "mib":
        return f"{value:.0f} MiB/s" if value >= 100 else f"{value:.1f} MiB/s"
    return f"{value:g}"  # a median of an even count may be a half


def over_floor(result, key, link, floor_key, kind="s"):
    """The figure in round trips divided by its floor."""
    value, instead = value_of(result, key)
    floor = link.floor(floor_key)
    if instead or not floor:
        return instead or "-"
    seconds = value if kind == "s" else value / 1e6
    return f"{seconds / link.rtt / floor:.2f}×"


def net_over_floor(result, local, key, link, floor_key):
    """As over_floor for a time in seconds, once the local row's time (what
    the command itself costs, which the floor leaves aside) is taken off."""
    value, instead = value_of(result, key)
    mine, missing = value_of(local, key)
    floor = link.floor(floor_key)
    if instead or missing or not floor:
        return instead or "-"
    return f"{(value - mine) / link.rtt / floor:.2f}×"


def of_link(result, key, link):
    value, instead = value_of(result, key)
    return instead or f"{value / link.rate_mib:.0%}"


def ratio(a, b):
    return f"{a / b:.2f}×" if a and b else "-"


def ratio_cell(result, key, reference):
    ok = result and "failed" not in result
    return ratio(result.get(key), (reference or {}).get(key)) if ok else "-"


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def spec_table(names, columns):
    """columns: (header, fn(name) -> cell text).  A column without a figure
    in any row (a workload the run left out) is left out; None when no
    column is left."""
    rows = [[fn(n) for _, fn in columns] for n in names]
    kept = [i for i in range(len(columns)) if any(row[i] != "-" for row in rows)]
    if not kept:
        return None
    return table([""] + [columns[i][0] for i in kept],
                 [[n] + [row[i] for i in kept] for n, row in zip(names, rows)])


def cold_time(header, workload, key, get, link, floor_key, kind="s"):
    """The column of a cold time and, on a WAN link, its ratio to its floor,
    and for a command's time (kind s) that ratio for the network's part."""
    columns = [(header, lambda n: cell(get(n, workload), key, kind, link))]
    if link.wan and link.floor(floor_key):
        columns.append((f"÷ floor {link.floor(floor_key)} RTT",
                        lambda n: "-" if n in OFF_LINK else
                        over_floor(get(n, workload), key, link, floor_key, kind)))
        local = get("local", workload)
        if kind == "s" and local and value_of(local, key)[0] is not None:
            columns.append(("net ÷ floor", lambda n: "-" if n in OFF_LINK else
                            net_over_floor(get(n, workload), local, key, link, floor_key)))
    return columns


def failures(results):
    out = []
    for name, workloads in results.items():
        for workload, r in workloads.items():
            if isinstance(r, dict) and "failed" in r:
                out.append(f"- {name}, {workload}: {r['failed']}")
    return out


def thread_counts(res):
    counts = {int(w.split("-")[1]) for r in res.values() for w in r
              if w.startswith("read-") and w.endswith("-threads")}
    return sorted(counts)


def demo_table(names, get, link):
    columns = []
    for label, workload in (("tar head", "tar-head"), ("xz head", "xz-head")):
        columns += cold_time(f"{label} cold", workload, "cold_seconds", get, link, workload)
        columns += [("fetched", lambda n, w=workload: cell(get(n, w), "cold_bytes", "bytes")),
                    ("warm", lambda n, w=workload: cell(get(n, w), "warm_seconds", "s", link)),
                    ("fetched", lambda n, w=workload: cell(get(n, w), "warm_bytes", "bytes"))]
    return ["**The demo**: `tar tvf linux-6.1.tar | head -20` (1.3 GB tar) and "
            "`xz -dc linux-6.1.tar.xz | tar tv | head -5`", "", spec_table(names, columns), "",
            "Bytes are those of nginx's access log, which logs a request when it ends: a peer "
            "that keeps a streaming GET open (rclone) has its bytes counted in the run in "
            "which it closes it."]


def metadata_table(names, get, link):
    def requests(workload):
        return ("requests", lambda n: cell(get(n, workload), "cold_requests", "n"))
    columns = (cold_time("deep cold", "deep-first-byte", "cold_seconds", get, link,
                         "deep-first-byte")
               + cold_time("ls exact cold", "ls-5000-exact", "cold_seconds", get, link,
                           "ls-5000-exact")
               + [requests("ls-5000-exact")]
               + cold_time("ls rounded cold", "ls-5000-rounded", "cold_seconds", get, link,
                           "ls-5000-rounded")
               + [requests("ls-5000-rounded"),
                  ("ls warm", lambda n: cell(get(n, "ls-5000-exact"), "warm_seconds", "s",
                                             link))]
               + cold_time("ls after TTL", "ls-5000-revalidated", "seconds", get, link,
                           "ls-5000-revalidated")
               + [("requests", lambda n: cell(get(n, "ls-5000-revalidated"), "requests",
                                              "n"))])
    return ["**Metadata**: first byte of a never-listed file 5 directories deep; "
            "`ls -l` of 5,000 files (requests sent); the rounded `ls -l` again once the "
            "listing's time-to-live (2 s) has passed, nothing having changed (contenders "
            "with such an option: httphsm's and rclone's `--dir-cache-time`)", "",
            spec_table(names, columns)]


def random_table(names, get, link):
    local = get("local", "read-1-threads")

    def read(n):
        return get(n, "read-1-threads")
    columns = (cold_time("cold p50", "read-1-threads", "cold_rand_p50_us", get, link,
                         RAND_FLOOR, "us")
               + cold_time("cold p99", "read-1-threads", "cold_rand_p99_us", get, link,
                           RAND_FLOOR, "us")
               + [("warm p50", lambda n: cell(read(n), "warm_rand_p50_us", "us", link)),
                  ("warm p99", lambda n: cell(read(n), "warm_rand_p99_us", "us", link)),
                  ("warm p50 / local", lambda n: ratio_cell(read(n), "warm_rand_p50_us",
                                                            local))])
    return [f"**Random reads** of the {span_words(link)}, one reader, 4 KiB preads; "
            "ratios against the local file from the same run", "",
            spec_table(names, columns)]


def span_words(link):
    return f"first {link.span / MIB:g} MiB of the 1.3 GB tar" if link.span else "1.3 GB tar"


def sequential_table(names, get, link):
    local, curl = get("local", "read-1-threads"), get("curl", "read-1-threads")

    def read(n):
        return get(n, "read-1-threads")
    columns = [("cold seq", lambda n: cell(read(n), "cold_seq_mib_s", "mib"))]
    if link.wan:
        columns.append(("÷ link rate", lambda n: "-" if n in OFF_LINK else
                        of_link(read(n), "cold_seq_mib_s", link)))
    columns += [("/ curl", lambda n: ratio_cell(read(n), "cold_seq_mib_s", curl)),
                ("warm seq", lambda n: cell(read(n), "warm_seq_mib_s", "mib")),
                ("/ local", lambda n: ratio_cell(read(n), "warm_seq_mib_s", local))]
    return [f"**Sequential reads** of the {span_words(link)}, one reader, 1 MiB reads; "
            "ratios against curl and the local file from the same run", "",
            spec_table(names, columns)]


def paired_notes(names, get):
    out = []
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
    return out


def curl_note(names, get, link):
    curl = get("curl", "read-1-threads")
    if not curl:
        return []
    if "failed" in curl:
        return ["", "curl of the same span failed (see Failures)."]
    rate = f" ({of_link(curl, 'cold_seq_mib_s', link)} of the link's rate)" if link.wan else ""
    what = "span" if link.span else "file"
    text = (f"curl of the same {what}: {cell(curl, 'cold_seq_mib_s', 'mib')} to /dev/null{rate}, "
            f"{cell(curl, 'to_file_mib_s', 'mib')} into a file on the caches' file system")
    for n in names:
        r = get(n, "read-1-threads") or {}
        if n.startswith("httphsm") and "failed" not in r and curl.get("to_file_mib_s"):
            text += (f"; {n} cold = {ratio(r.get('cold_seq_mib_s'), curl['to_file_mib_s'])}"
                     " of the latter")
    return ["", text + "."]


def concurrency_table(names, get, link, res):
    columns = []
    for t in thread_counts(res):
        columns += [(f"{t}: p50", lambda n, t=t: cell(get(n, f"read-{t}-threads"),
                                                      "warm_rand_p50_us", "us", link)),
                    (f"{t}: seq", lambda n, t=t: cell(get(n, f"read-{t}-threads"),
                                                      "warm_seq_mib_s", "mib"))]
    if link.wan:
        columns += [(f"{t}: cold seq ÷ link",
                     lambda n, t=t: "-" if n in OFF_LINK else
                     of_link(get(n, f"read-{t}-threads"), "cold_seq_mib_s", link))
                    for t in thread_counts(res)]
    return ["**Concurrent readers** (warm): 4 KiB random p50 and sequential throughput"
            + ("; cold sequential throughput as a fraction of the link's rate"
               if link.wan else ""), "", spec_table(names, columns)]


def floor_notes(link):
    """The derivation of each floor, and what the floors leave aside."""
    if not link.wan or not link.floors:
        return []
    labels = {"tar-head": "tar head", "xz-head": "xz head", "deep-first-byte": "deep",
              "ls-5000-exact": "ls exact", "ls-5000-rounded": "ls rounded",
              "ls-5000-revalidated": "ls after TTL",
              RAND_FLOOR: "cold random 4 KiB read (p50 and p99)"}
    out = ["", f"**Floors** (round trips that any client must wait for on {link.name}, "
           "with its connections warm after the mount, which listed the mount root pub/; "
           "transfer time aside; a figure's `÷ floor` is its round trips divided by these):",
           ""]
    for key, floor in link.floors.items():
        out.append(f"- {labels.get(key, key)}: {floor['rtt']} RTT: {floor['why']}.")
    for key, size in link.listing_bytes.items():
        if size:
            seconds = size / (link.rate_mib * MIB)
            out.append(f"- {labels.get(key, key)} leaves aside the listing page's "
                       f"{fmt_bytes(size)}: {seconds * 1000:.0f} ms = {fmt_rtt(seconds / link.rtt)}"
                       f" at the full rate{' (and the HEADs)' if 'rounded' in key else ''}.")
    out.append("- local uses no link: its times in round trips are what the command itself "
               "costs, which the floors leave aside too; `net ÷ floor` takes the local time "
               "off a figure before it divides by the floor.")
    out.append(f"- Warm figures have a floor of 0 RTT; sequential reads cover the "
               f"{span_words(link)}, which at the link's full rate of "
               f"{link.rate_mib:.2f} MiB/s ({link.rate_mbit:g} Mbit/s) take "
               f"{(link.span or 0) / MIB / link.rate_mib:.1f} s.")
    return out


def link_markdown(section, image):
    """One link's tables; image: the plot's path as the markdown sees it."""
    link, res = Link(section), section["results"]
    names = [n for n in res if n != "curl"]

    def get(n, w):
        return res.get(n, {}).get(w)
    out = [f"#### {link.title()}", ""]
    if image:
        out += [f"![{link.name}]({image})", ""]
    if section.get("orders"):
        out += ["Order of the repetitions: " +
                "; ".join(", ".join(order) for order in section["orders"]) + ".", ""]
    tables = [demo_table(names, get, link), metadata_table(names, get, link),
              random_table(names, get, link),
              sequential_table(names, get, link) + curl_note(names, get, link)
              + paired_notes(names, get),
              concurrency_table(names, get, link, res)]
    # A table is left out when the run had none of its workloads (--workloads).
    for lines in (t for t in tables if None not in t):
        out += lines + [""]
    out = out[:-1] + floor_notes(link)
    failed = failures(res)
    if failed:
        out += ["", "Failures:", ""] + failed
    return out


def markdown(data, images):
    """images: link name -> plot path as the markdown sees it."""
    env = data["environment"]
    # Runs before results.json had per-link sections ran contenders in a fixed order.
    rotating = ", contenders in rotating order" if "links" in data else ""
    out = [f"Measured {env['date']} on {env['where']} (kernel {env['kernel']}, "
           f"{env['cpus']} CPUs{', virtualised' if env['virtualised'] else ''}); "
           f"median of {data['repeat']} runs{rotating}.  Cold: fresh mount, empty cache, "
           f"dropped page cache.  Warm: the same again.", ""]
    for name, section in sections(data):
        out += link_markdown(section, images.get(name)) + [""]
    if "QEMU" in env["where"]:
        out += ["In the guest, `local` is the host's tree through a 9p share (what nginx "
                "serves): it is no native reference there; for fanotify mode the cache file "
                "read directly is.", ""]
    return "\n".join(out)


def plot_values(res, names, workload, key, scale=1.0):
    """{name: value, or None where it failed}; no entry where the contender
    does not run the workload (curl) or gave no such figure."""
    out = {}
    for n in names:
        r = res.get(n, {}).get(workload)
        if r and "failed" in r:
            out[n] = None
        elif r and r.get(key) is not None:
            out[n] = r[key] * scale
    return out


def grouped_bars(ax, names, groups, title, unit, log=False, floors=None):
    """groups: (label, {name: value}); a failed one (None) is a cross on
    the axis, one without an entry an empty slot.  No value labels, which
    would cover bars: the tables have the numbers.  floors: the floor of
    each group, drawn as a black line across it.  A group no contender ran
    (--workloads) is left out, and a panel with none left is hidden."""
    kept = [g for g, (_, values) in enumerate(groups) if values]
    groups = [groups[g] for g in kept]
    floors = [floors[g] for g in kept] if floors else None
    if not groups:
        ax.set_visible(False)
        return
    width = 0.8 / max(len(names), 1)
    for g, (_, values) in enumerate(groups):
        for i, n in enumerate(names):
            x = g - 0.4 + width * (i + 0.5)
            v = values.get(n)
            if v:
                ax.bar(x, v, width, color=COLOURS.get(n, "#bcbd22"))
            elif v is None and n in values:
                ax.plot(x, 0, marker="x", color=COLOURS.get(n, "#bcbd22"), clip_on=False,
                        transform=ax.get_xaxis_transform(), markersize=7)
        if floors and floors[g]:
            ax.hlines(floors[g], g - 0.45, g + 0.45, colors="black", linewidth=2)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([label for label, _ in groups], fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(unit)
    if log:
        ax.set_yscale("log")


def loopback_panels(axes, res, names, threads):
    network = [n for n in names if n not in ("local", "curl")]
    grouped_bars(axes[0], network, [
        (label, plot_values(res, network, w, "cold_bytes", 1 / MIB))
        for label, w in (("tar head", "tar-head"), ("xz head", "xz-head"))],
        "bytes fetched, cold", "MiB", log=True)
    readers = [n for n in names if n != "curl"]
    grouped_bars(axes[1], readers, [
        (f"{t} reader{'s' if t > 1 else ''}",
         plot_values(res, readers, f"read-{t}-threads", "warm_rand_p50_us")) for t in threads],
        "warm 4 KiB random read, p50", "µs", log=True)
    grouped_bars(axes[2], names, [
        (f"{t} reader{'s' if t > 1 else ''}",
         plot_values(res, names, f"read-{t}-threads", "cold_seq_mib_s")) for t in threads],
        "cold sequential read", "MiB/s")


def wan_panels(axes, res, names, threads, link):
    """Local stays in the first panel only: what each command costs with no
    network at all, in round trips; elsewhere it would dwarf the rest."""
    readers = [n for n in names if n != "curl"]
    remote = [n for n in names if n not in OFF_LINK]
    workloads = (("tar head", "tar-head"), ("xz head", "xz-head"), ("deep", "deep-first-byte"),
                 ("ls exact", "ls-5000-exact"), ("ls rounded", "ls-5000-rounded"))
    grouped_bars(axes[0], readers, [
        (label, plot_values(res, readers, w, "cold_seconds", 1 / link.rtt))
        for label, w in workloads], "cold time in round trips (black: floor)", "RTT", log=True,
        floors=[link.floor(w) for _, w in workloads])
    # Bars on a log axis start at its bottom: a fixed one keeps heights comparable.
    axes[0].set_ylim(bottom=0.1)
    mounts = [n for n in remote if n != "curl"]
    rand = [(f"p{p}", plot_values(res, mounts, "read-1-threads", f"cold_rand_p{p}_us",
                                  1e-6 / link.rtt)) for p in (50, 99)]
    grouped_bars(axes[1], mounts, rand, "cold 4 KiB random read, 1 reader (black: floor)",
                 "RTT", floors=[link.floor(RAND_FLOOR)] * 2)
    grouped_bars(axes[2], remote, [
        (f"{t} reader{'s' if t > 1 else ''}",
         plot_values(res, remote, f"read-{t}-threads", "cold_seq_mib_s", 100 / link.rate_mib))
        for t in threads], f"cold sequential read, first {link.span / MIB:g} MiB (black: link rate)",
        "% of the link's rate")
    axes[2].axhline(100, color="black", linewidth=2)
    axes[2].set_ylim(0, max(110, axes[2].get_ylim()[1]))


def plot_link(plt, section, path):
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    link, res = Link(section), section["results"]
    names = list(res)
    threads = thread_counts(res)
    fig, axes = plt.subplots(1, 3, figsize=(16, 5))
    if link.wan:
        wan_panels(axes, res, names, threads, link)
    else:
        loopback_panels(axes, res, names, threads)
    handles = [Patch(color=COLOURS.get(n, "#bcbd22"), label=n) for n in names]
    handles.append(Line2D([], [], marker="x", linestyle="", color="black",
                          label="failed"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=9,
               frameon=False)
    fig.suptitle(link.title(), fontsize=11)
    fig.subplots_adjust(left=0.05, right=0.98, bottom=0.16, top=0.86,
                        wspace=0.22)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plots(data, out_dir):
    """Writes bench-LINK.png for each link; returns {link: path}."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = {}
    for name, section in sections(data):
        paths[name] = os.path.join(out_dir, f"bench-{name}.png")
        plot_link(plt, section, paths[name])
    return paths


def relative_images(paths, start):
    return {name: os.path.relpath(path, start) for name, path in paths.items()}


def update_readme(runs):
    """runs: (results.json data, plot paths, results dir) of each run, in order."""
    with open(README) as f:
        text = f.read()
    readme_dir = os.path.dirname(README)
    parts = [f"{BEGIN}\n_Generated by `bench/report.py --update-readme` from the runs below._\n"]
    for data, paths, out_dir in runs:
        rel_md = os.path.relpath(os.path.join(out_dir, "results.md"), readme_dir)
        md = markdown(data, relative_images(paths, readme_dir))
        parts.append(f"\n### {os.path.basename(out_dir)} ([tables]({rel_md}))\n\n{md}")
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
        paths = plots(data, out_dir)
        md = markdown(data, relative_images(paths, out_dir))
        with open(os.path.join(out_dir, "results.md"), "w") as f:
            f.write(md)
        runs.append((data, paths, out_dir))
        print(md)
    if "--update-readme" in sys.argv:
        update_readme(runs)


if __name__ == "__main__":
    main()
