# tollgate serve's fetch_webpage and browser_fetch: this program runs INSIDE a
# fresh sandbox, whose only network is tollgate's gate (HTTP_PROXY), so that the
# page's hostile bytes are fetched and parsed there and never in the gateway.
# It reads /work/fetch.json and writes one JSON object on stdout (gateway/mcp/
# fetchurl.h, serve_fetch_answer_parse): the page, or {"error", "kind"}.
# Embedded in tollgate at build time; run by Debian's /usr/bin/python3.
import json
import os
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from html.parser import HTMLParser


def answer(obj):
    sys.stdout.write(json.dumps(obj, ensure_ascii=False))
    sys.stdout.flush()
    sys.exit(0)


def fail(kind, message):
    answer({"error": message, "kind": kind})


try:
    import html2text
except ImportError:
    fail("missing", "the HTML converter is not installed in the sandbox's view: "
         "Debian's python3-html2text (scripts/install-deps)")

with open("/work/fetch.json", encoding="utf-8") as f:
    req = json.load(f)
URL = req["url"]
MAX_BYTES = int(req["max_bytes"])
TIMEOUT = float(req["timeout"])
MAX_REDIRECTS = int(req["max_redirects"])


class Title(HTMLParser):
    """The first <title>'s text, by the standard library's HTML tokenizer."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.inside = False
        self.done = False
        self.parts = []

    def handle_starttag(self, tag, attrs):
        if tag == "title" and not self.done:
            self.inside = True

    def handle_endtag(self, tag):
        if tag == "title" and self.inside:
            self.inside = False
            self.done = True

    def handle_data(self, data):
        if self.inside:
            self.parts.append(data)


def title_of(html):
    t = Title()
    try:
        t.feed(html)
        t.close()
    except Exception:  # a page the tokenizer gives up on has no title
        pass
    title = " ".join("".join(t.parts).split())
    return cut(title, 1000)[0] if title else None


def cut(text, limit):
    """text in at most limit UTF-8 bytes, never half a character."""
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text, False
    return raw[:limit].decode("utf-8", errors="ignore"), True


def readable(text):
    # Control characters (a terminal's escapes among them) become spaces;
    # newlines and tabs stay.
    return "".join(c if c in "\n\t" or (c >= " " and c != "\x7f") else " " for c in text)


def to_markdown(html):
    h = html2text.HTML2Text()
    h.body_width = 0  # no wrapping: the client wraps
    h.unicode_snob = True
    h.ignore_images = False
    h.ignore_links = False
    # html2text drops <script>, <style> and <head>: no code reaches the text.
    return h.handle(html)


def finish(final_url, status, ctype, body, truncated):
    """The answer for body (bytes, at most MAX_BYTES of the page)."""
    mime = ctype.split(";", 1)[0].strip().lower()
    charset = "utf-8"
    for param in ctype.split(";")[1:]:
        k, _, v = param.strip().partition("=")
        if k.lower() == "charset" and v:
            charset = v.strip('"').strip()
    try:
        text = body.decode(charset, errors="replace")
    except LookupError:
        text = body.decode("utf-8", errors="replace")
    title = None
    if mime in ("", "text/html", "application/xhtml+xml"):
        title = title_of(text)
        text = to_markdown(text)
    elif not (mime.startswith("text/") or mime in ("application/json", "application/xml")
              or mime.endswith("+json") or mime.endswith("+xml")):
        fail("content", "the page is %s, not HTML or text" % mime[:100])
    text, cut_text = cut(readable(text), MAX_BYTES)
    answer({"final_url": final_url, "status": status, "content_type": ctype[:250],
            "title": title, "text": text, "truncated": truncated or cut_text,
            "bytes": len(body)})


class Redirects(urllib.request.HTTPRedirectHandler):
    """Follows at most MAX_REDIRECTS hops, each to http or https only, each
    through the gate like the first (the proxy is the sandbox's only route)."""

    max_redirections = MAX_REDIRECTS
    max_repeats = 2

    def redirect_request(self, req_, fp, code, msg, headers, newurl):
        parts = urllib.parse.urlsplit(newurl)
        if parts.scheme.lower() not in ("http", "https"):
            fail("network", "a redirect to a %s: URL is not followed" % parts.scheme[:20])
        if parts.username is not None or parts.password is not None:
            fail("network", "a redirect to a URL with a user name or password is not followed")
        return super().redirect_request(req_, fp, code, msg, headers, newurl)


def read_capped(resp):
    body = resp.read(MAX_BYTES + 1)
    return body[:MAX_BYTES], len(body) > MAX_BYTES


def fetch():
    # Everything goes to the gate, the sandbox's own loopback too (an
    # address the operator allowed is reached there, never in the sandbox).
    for name in ("NO_PROXY", "no_proxy"):
        os.environ.pop(name, None)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler(), Redirects())
    request = urllib.request.Request(URL, headers={
        "User-Agent": "tollgate-fetch/1 (python-urllib)",
        "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
    })
    try:
        resp = opener.open(request, timeout=TIMEOUT)
    except urllib.error.HTTPError as e:  # a 4xx or 5xx still has a page
        body, truncated = read_capped(e)
        finish(e.geturl(), e.code, e.headers.get("Content-Type", ""), body, truncated)
    except urllib.error.URLError as e:
        if "redirect" in str(e.reason):
            fail("network", "too many redirects (at most %d are followed)" % MAX_REDIRECTS)
        fail("network", "cannot fetch: %s" % str(e.reason)[:300])
    except (OSError, ValueError) as e:
        fail("network", "cannot fetch: %s" % str(e)[:300])
    with resp:
        body, truncated = read_capped(resp)
        finish(resp.geturl(), resp.status, resp.headers.get("Content-Type", ""), body, truncated)


def browse():
    """Headless Chromium loads the page and runs its scripts; its DOM then is
    the page. --no-sandbox: Chromium's own sandbox needs user namespaces or a
    setuid helper, which tollgate's sandbox refuses (seccomp, no_new_privs);
    tollgate's sandbox is what contains it (docs/mcp.md)."""
    proxy = os.environ.get("HTTP_PROXY") or os.environ.get("http_proxy") or ""
    argv = [req["chromium"], "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
            "--disable-extensions", "--disable-sync", "--disable-background-networking",
            "--disable-component-update", "--user-data-dir=/tmp/tollgate-chromium",
            "--virtual-time-budget=%d" % int(req["wait_ms"]), "--dump-dom"]
    if proxy:
        # <-loopback>: loopback too goes to the gate, as in fetch().
        argv += ["--proxy-server=" + proxy, "--proxy-bypass-list=<-loopback>"]
    argv.append(URL)
    try:
        with open("/tmp/chromium.err", "wb") as errf:
            run = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=errf, timeout=TIMEOUT)
    except FileNotFoundError:
        fail("missing", "Chromium is not installed: %s not found" % req["chromium"][:200])
    except subprocess.TimeoutExpired:
        fail("browser", "Chromium did not finish in %.0f s" % TIMEOUT)
    if run.returncode != 0 or not run.stdout:
        with open("/tmp/chromium.err", "rb") as errf:
            tail = errf.read()[-400:].decode("utf-8", errors="replace")
        fail("browser", "Chromium exited with status %d: %s" % (run.returncode, tail))
    body = run.stdout[:MAX_BYTES]
    finish(None, None, "text/html; charset=utf-8", body, len(run.stdout) > MAX_BYTES)


if req["mode"] == "browser":
    browse()
else:
    fetch()
