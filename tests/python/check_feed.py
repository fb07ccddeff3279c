#!/usr/bin/env python3
"""Checks an Atom feed against what a test expects of it.

Reads one JSON object on standard input: {"xml": the feed's body, "expect": {...}} where
expect holds "id", "title", "self", "alternate" (or null) of the feed and "entries", a list of
{"id", "title", "author", "html", "link" (or null)} in the feed's order.

The feed must parse with feedparser without any problem (bozo 0) and hold exactly those entries
in that order, and it must follow the rules of RFC 4287 that feedparser does not enforce: one
id, title and updated in the feed and in each entry, an author for each entry, absolute ids,
RFC 3339 dates, published not after updated, content of type html, a self link. Prints what is
wrong and exits 1, or exits 0.
"""

import json
import re
import sys
import xml.etree.ElementTree as ET

import feedparser

ATOM = "{http://www.w3.org/2005/Atom}"
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$")

problems = []


def check(ok, message):
    if not ok:
        problems.append(message)


def one(element, name, where):
    """The text of the one child `name` of `element`, or None (and a problem) when not one."""
    found = element.findall(ATOM + name)
    check(len(found) == 1, f"{where}: {len(found)} <{name}> elements, expected exactly 1")
    return found[0].text if found else None


def links(element):
    return [(l.get("rel", "alternate"), l.get("type"), l.get("href")) for l in element.findall(ATOM + "link")]


def check_date(text, where):
    check(text is not None and DATE.match(text) is not None, f"{where}: {text!r} is not an RFC 3339 date")


def check_structure(root, expect):
    check(root.tag == ATOM + "feed", f"the root is {root.tag}, not an Atom feed")
    feed_id = one(root, "id", "feed")
    check(feed_id is not None and SCHEME.match(feed_id), f"feed id {feed_id!r} is not an absolute IRI")
    check(feed_id == expect["id"], f"feed id {feed_id!r}, expected {expect['id']!r}")
    title = one(root, "title", "feed")
    check(title == expect["title"], f"feed title {title!r}, expected {expect['title']!r}")
    check_date(one(root, "updated", "feed"), "feed updated")
    feed_links = links(root)
    selfs = [href for rel, _, href in feed_links if rel == "self"]
    check(selfs == [expect["self"]], f"feed self links {selfs}, expected [{expect['self']!r}]")
    alternates = [href for rel, _, href in feed_links if rel == "alternate"]
    want = [expect["alternate"]] if expect["alternate"] is not None else []
    check(alternates == want, f"feed alternate links {alternates}, expected {want}")
    feed_author = root.findall(ATOM + "author")
    for n, entry in enumerate(root.findall(ATOM + "entry")):
        where = f"entry {n}"
        entry_id = one(entry, "id", where)
        check(entry_id is not None and SCHEME.match(entry_id), f"{where}: id {entry_id!r} is not an absolute IRI")
        one(entry, "title", where)
        updated = one(entry, "updated", where)
        check_date(updated, f"{where} updated")
        published = one(entry, "published", where)
        check_date(published, f"{where} published")
        if published and updated:
            check(published <= updated, f"{where}: published {published} is after updated {updated}")
        authors = entry.findall(ATOM + "author")
        check(authors or feed_author, f"{where}: no author")
        for author in authors:
            one(author, "name", f"{where} author")
        contents = entry.findall(ATOM + "content")
        check(len(contents) == 1, f"{where}: {len(contents)} <content> elements, expected 1")
        for content in contents:
            check(content.get("type") == "html", f"{where}: content type {content.get('type')!r}, expected html")
        kinds = [(rel, kind) for rel, kind, _ in links(entry) if rel == "alternate"]
        check(len(kinds) == len(set(kinds)), f"{where}: two alternate links of one type")


def check_entries(root, parsed, expect):
    wanted = expect["entries"]
    entries = parsed.entries
    check(len(entries) == len(wanted), f"{len(entries)} entries, expected {len(wanted)}")
    got_ids = [e.get("id") for e in entries]
    check(got_ids == [w["id"] for w in wanted], f"entry ids (in order) {got_ids}, expected {[w['id'] for w in wanted]}")
    raw = root.findall(ATOM + "entry")
    for n, (entry, element, want) in enumerate(zip(entries, raw, wanted)):
        where = f"entry {n} ({want['id']})"
        check(entry.get("author") == want["author"], f"{where}: author {entry.get('author')!r}, expected {want['author']!r}")
        check(entry.get("title") == want["title"], f"{where}: title {entry.get('title')!r}, expected {want['title']!r}")
        # The html exactly as served, from the document itself (feedparser sanitises it again).
        content = element.find(ATOM + "content")
        html = content.text if content is not None else None
        check(html == want["html"], f"{where}: content {html!r}, expected {want['html']!r}")
        parsed_html = entry.get("content", [{}])[0].get("value")
        check(parsed_html is not None and "<script" not in parsed_html.lower(), f"{where}: parsed content {parsed_html!r}")
        link = next((l.get("href") for l in entry.get("links", []) if l.get("rel") == "alternate"), None)
        check(link == want["link"], f"{where}: link {link!r}, expected {want['link']!r}")


def main():
    given = json.load(sys.stdin)
    xml, expect = given["xml"], given["expect"]
    parsed = feedparser.parse(xml.encode("utf-8"))
    check(parsed.bozo == 0, f"feedparser: bozo {parsed.bozo} ({parsed.get('bozo_exception')!r})")
    check(parsed.version == "atom10", f"feedparser: version {parsed.version!r}, expected atom10")
    try:
        root = ET.fromstring(xml.encode("utf-8"))
    except ET.ParseError as err:
        print(f"not well-formed XML: {err}", file=sys.stderr)
        return 1
    check_structure(root, expect)
    check_entries(root, parsed, expect)
    if problems:
        for problem in problems:
            print(problem, file=sys.stderr)
        return 1
    print(f"ok: {len(parsed.entries)} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
