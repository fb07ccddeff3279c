"""How many bucket pages the comments each thread-shaped read returns lie on, in the bucketed
discussions a benchmark run left in a database (the harness leaves its database when given
`--mongodb-uri`), against the pages that hold the whole threads they are in.

    threadql-bench --mongodb-uri "mongodb://127.0.0.1:27099/?directConnection=true" \\
        --layouts bucketed --sizes 1000,100000 --reads direct-link --no-writes
    python3 bench/floor.py "mongodb://127.0.0.1:27099/?directConnection=true"   # needs pymongo

A bucket page holds comments in posting order, and the development database reads a whole page
to return any part of it, so the first column is a floor for any read of this layout: what a
read that knew exactly which comments it needs would still touch. Threaded pages read the pages
of the threads their window is in (second column; the threads of the window's first and last
pages, so a few more), a sub-discussion those of its thread from the root's page on; replies and
trees read just the pages that hold their windows (their replies per page say which), so for
them the floor is what they read. The reads are the
benchmark's (bench/src/reads.rs): the first 50 comments in threaded order and the 50 at offset
10 000 (or the last 50 of a smaller discussion), the first 50 of the largest thread's
sub-discussion, the first 50 replies of the comment with the most replies, and the tree of 20
threads with 4 levels of 10 replies. See BENCHMARKS.md.
"""
import sys
from collections import defaultdict

from pymongo import MongoClient

PAGE, DEEP = 50, 10_000


def top(full_slug):
    return full_slug.split("/")[0]


def report(db, discussion):
    did = discussion["_id"]
    rows = []  # (full_slug, slug, parent, posted, page)
    projection = {"page": 1, "comments.slug": 1, "comments.full_slug": 1,
                  "comments.parent": 1, "comments.posted": 1}
    for page in db.comment_pages.find({"discussion_id": did}, projection):
        for c in page["comments"]:
            rows.append((c["full_slug"], c["slug"], c.get("parent"), c["posted"], page["page"]))
    if not rows:
        return
    threaded = sorted(rows)
    chronological = sorted(rows, key=lambda c: (c[3], c[1]))
    children = defaultdict(list)
    for c in chronological:
        children[c[2]].append(c)
    thread_size = defaultdict(int)
    thread_pages = defaultdict(set)
    for c in rows:
        thread_size[top(c[0])] += 1
        thread_pages[top(c[0])].add(c[4])

    def holding(comments):
        return len({c[4] for c in comments})

    def of_threads(comments):
        return len(set().union(*(thread_pages[top(c[0])] for c in comments)))

    n = len(rows)
    deep = min(DEEP, max(n - PAGE, 1))
    largest = max(thread_size, key=thread_size.get)
    root = next(c for c in rows if c[0] == largest)
    below = [c for c in threaded if c[0].startswith(largest + "/")]
    busiest = max((k for k in children if k is not None), key=lambda k: len(children[k]))
    level = children[None][:20]
    tree = list(level)
    for _ in range(4):
        level = [r for c in level for r in children[c[1]][:10]]
        tree += level
    table = [
        ("threaded first page (50)", threaded[:PAGE], of_threads(threaded[:PAGE])),
        (f"threaded page at offset {deep}", threaded[deep:deep + PAGE],
         of_threads(threaded[deep:deep + PAGE])),
        ("sub-discussion (50)", below[:PAGE],
         len({c[4] for c in below if c[4] >= root[4]} | {root[4]})),
        ("replies of the busiest comment (50)", children[busiest][:PAGE], None),
        ("tree 20×4 levels", tree, None),
    ]
    pages = holding(rows)
    print(f"\n{n} comments on {pages} pages; the largest thread has {thread_size[largest]} "
          f"comments on {len(thread_pages[largest])} pages\n")
    print("| read | pages holding what it returns | pages holding the threads it is in |")
    print("|---|---:|---:|")
    for label, returned, threads in table:
        print(f"| {label} | {holding(returned)} | {'—' if threads is None else threads} |")


def main():
    uri = sys.argv[1] if len(sys.argv) > 1 else "mongodb://127.0.0.1:27017/?directConnection=true"
    client = MongoClient(uri)
    for name in client.list_database_names():
        db = client[name]
        if "comment_pages" not in db.list_collection_names():
            continue
        for discussion in db.discussions.find({"layout": "bucketed"}).sort("comment_count", 1):
            report(db, discussion)


if __name__ == "__main__":
    main()
