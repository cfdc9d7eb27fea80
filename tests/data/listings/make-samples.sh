#!/bin/bash
# Regenerates the listing samples that the listing parser's unit test reads.
# Each sample is the page a real server (Debian 12 packages) produced for the
# same directory; <server>.html is the page, sample.tsv the ground truth.
# Run as root on Debian 12: apt-get install nginx-light apache2 lighttpd caddy python3
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; for p in "$work"/*.pid; do [ -f "$p" ] && kill "$(cat "$p")" 2>/dev/null; done; sleep 0.5; rm -rf "$work"' EXIT
chmod 755 "$work"
root=$work/root
mkdir -p "$root/subdir" "$root/dir with space"
export TZ=UTC
mk() { # name size date
	truncate -s "$2" "$root/$1"
	touch -d "$3" "$root/$1"
}
mk small.txt 10 "2026-11-02 10:20:30"
mk empty 0 "2025-01-31 23:59:01"
mk exact-9999.bin 9999 "2024-02-29 12:00:00"
mk rounded-12345.bin 12345 "2026-06-15 08:05:00"
mk big-2500000.bin 2500000 "2026-07-04 17:45:59"
mk huge-5368709120.img 5368709120 "2026-12-01 00:00:00"
mk "with space & ampersand.txt" 100 "2026-11-02 10:20:30"
mk "percent%41 literal.txt" 101 "2026-11-02 10:20:30"
mk "ünïcødé-名前.txt" 102 "2026-11-02 10:20:30"
mk "a-very-long-file-name-that-exceeds-fifty-columns-in-an-nginx-listing.tar.xz" 103 "2026-11-02 10:20:30"
mk "quote\"and<angle>.txt" 104 "2026-11-02 10:20:30"
mk "hash#mark.txt" 105 "2026-11-02 10:20:30"
mk "question?mark.txt" 106 "2026-11-02 10:20:30"
mk "semi;colon+plus.txt" 107 "2026-11-02 10:20:30"
touch -d "2026-10-01 09:08:07" "$root/subdir" "$root/dir with space"

# Ground truth: name (percent-encoded), type, size, mtime (Unix seconds).
python3 - "$root" > "$here/sample.tsv" <<'PY'
import os, sys, urllib.parse
root = sys.argv[1]
for name in sorted(os.listdir(root)):
    st = os.stat(os.path.join(root, name))
    kind = "d" if os.path.isdir(os.path.join(root, name)) else "f"
    size = 0 if kind == "d" else st.st_size
    print(f"{urllib.parse.quote(name, safe='')}\t{kind}\t{size}\t{int(st.st_mtime)}")
PY

cat > "$work/nginx.conf" <<NGX
daemon off; pid $work/nginx.pid; error_log stderr;
events {}
http {
  access_log off;
  server { listen 127.0.0.1:18081; root $root; autoindex on; }
  server { listen 127.0.0.1:18082; root $root; autoindex on; autoindex_exact_size off; }
}
NGX
nginx -c "$work/nginx.conf" -p "$work" &

mods=/usr/lib/apache2/modules
for variant in fancy-table fancy-pre plain; do
	case $variant in
	fancy-table) opts="FancyIndexing HTMLTable VersionSort NameWidth=* Charset=UTF-8"; port=18083 ;;
	fancy-pre) opts="FancyIndexing NameWidth=* Charset=UTF-8"; port=18084 ;;
	plain) opts="Charset=UTF-8"; port=18085 ;;
	esac
	cat > "$work/apache-$variant.conf" <<APA
ServerRoot $work
PidFile $work/apache-$variant.pid
Mutex file:$work
LoadModule mpm_prefork_module $mods/mod_mpm_prefork.so
LoadModule authz_core_module $mods/mod_authz_core.so
LoadModule mime_module $mods/mod_mime.so
LoadModule autoindex_module $mods/mod_autoindex.so
LoadModule dir_module $mods/mod_dir.so
TypesConfig /etc/mime.types
Listen 127.0.0.1:$port
ServerName localhost
ErrorLog $work/apache-$variant.err
DocumentRoot $root
<Directory $root>
  Options +Indexes
  Require all granted
  IndexOptions $opts
</Directory>
APA
	apache2 -f "$work/apache-$variant.conf" -k start
done

cat > "$work/lighttpd.conf" <<LIG
server.document-root = "$root"
server.bind = "127.0.0.1"
server.port = 18086
server.pid-file = "$work/lighttpd.pid"
server.modules = ( "mod_dirlisting" )
dir-listing.activate = "enable"
dir-listing.encoding = "utf-8"
LIG
lighttpd -f "$work/lighttpd.conf"

cat > "$work/Caddyfile" <<CAD
{
	admin off
	auto_https off
}
http://127.0.0.1:18087 {
	root * $root
	file_server browse
}
CAD
HOME=$work XDG_DATA_HOME=$work XDG_CONFIG_HOME=$work caddy run --config "$work/Caddyfile" --adapter caddyfile >"$work/caddy.log" 2>&1 &

(cd "$root" && exec python3 -m http.server --bind 127.0.0.1 18088) >"$work/python.log" 2>&1 &

sleep 2
get() { curl -fsS --retry 5 --retry-connrefused --retry-delay 1 -o "$here/$1.html" "http://127.0.0.1:$2/"; }
get nginx-exact 18081
get nginx-rounded 18082
get apache-fancy-table 18083
get apache-fancy-pre 18084
get apache-plain 18085
get lighttpd 18086
get caddy 18087
get python-http-server 18088
apache2 -f "$work/apache-fancy-table.conf" -k stop
apache2 -f "$work/apache-fancy-pre.conf" -k stop
apache2 -f "$work/apache-plain.conf" -k stop
echo "samples written to $here"
