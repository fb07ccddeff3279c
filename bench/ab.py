"""Two (or more) `threadql` server binaries on one loaded database, in turns: each serves the
largest bucketed discussion's first page, first threaded page and the first sub-discussion
pages of its three largest threads, and the tree (20 threads × 4 levels of 10 replies, the
harness's) of every bucketed discussion: 60 requests each (the first 10 not timed), three
rounds, one keep-alive client. Every binary must give the same answers. Comparing binaries
on the same stored data, in alternation, keeps the noise of separate loads and of the
machine out of the comparison (see BENCHMARKS.md).

    threadql-bench --mongodb-uri "mongodb://127.0.0.1:27099/?directConnection=true" \
        --layouts bucketed --sizes 100000 --reads direct-link --no-writes
    python3 bench/ab.py "mongodb://127.0.0.1:27099/?directConnection=true" OLD_BIN NEW_BIN
"""
import http.client, json, os, statistics, subprocess, sys, time
from collections import Counter
from pymongo import MongoClient
URI = sys.argv[1]
c = MongoClient(URI)
name = [n for n in c.list_database_names() if n.startswith("threadql_bench")][0]
db = c[name]
d = db.discussions.find_one({"layout": "bucketed"}, sort=[("comment_count", -1)])
sizes = Counter(); tops = {}
for p in db.comment_pages.find({"discussion_id": d["_id"]}, {"comments.full_slug": 1, "comments.slug": 1}):
    for x in p["comments"]:
        t = x["full_slug"].split("/")[0]; sizes[t] += 1
        if "/" not in x["full_slug"]: tops[t] = x["slug"]
roots = [(tops[t], n) for t, n in sizes.most_common(3)]
F = "fragment F on Comment { id slug fullSlug parentSlug depth posted editedAt deleted author { id name } text replyCount }"
PAGE = "nodes { ...F } pageInfo { hasNextPage endCursor }"
reads = {
 "first page": ("query($d: ID!) { discussion(id: $d) { comments(first: 50) { %s } } } %s" % (PAGE, F), {"d": d["_id"]}),
 "threaded first": ("query($d: ID!) { discussion(id: $d) { comments(order: THREADED, first: 50) { %s } } } %s" % (PAGE, F), {"d": d["_id"]}),
}
for t in db.discussions.find({"layout": "bucketed"}).sort("comment_count", 1):
    level = "...F"
    for _ in range(4):
        level = "...F replies(first: 10) { nodes { %s } }" % level
    reads["tree %d" % t["comment_count"]] = ("query($d: ID!) { discussion(id: $d) { threads(first: 20) { nodes { %s } } } } %s" % (level, F), {"d": t["_id"]})
for rank, (root, n) in enumerate(roots):
    reads["sub-discussion #%d (%d)" % (rank + 1, n)] = ("query($d: ID!, $s: String!) { comment(discussionId: $d, slug: $s) { slug subDiscussion(first: 50) { %s } } } %s" % (PAGE, F), {"d": d["_id"], "s": root})
answers = {}
bins = sys.argv[2:]
res = {(b, r): [] for b in bins for r in reads}
def serve(b, port):
    env = dict(os.environ, THREADQL_MONGODB_URI=URI, THREADQL_DATABASE=name, THREADQL_LISTEN=f"127.0.0.1:{port}",
               THREADQL_JWT_SECRET="x" * 40, THREADQL_LOG="warn", THREADQL_RATE_LIMIT="off", THREADQL_RATE_LIMIT_ANON="off",
               THREADQL_MAX_COMPLEXITY="100000000")
    p = subprocess.Popen([b, "serve"], env=env, stdout=subprocess.DEVNULL)
    for _ in range(100):
        try:
            h = http.client.HTTPConnection("127.0.0.1", port); h.request("GET", "/readyz"); r = h.getresponse(); r.read()
            if r.status == 200: return p, h
        except OSError: pass
        time.sleep(0.1)
    raise SystemExit("not ready")
for round_ in range(3):
    for i, b in enumerate(bins):
        p, h = serve(b, 18500 + round_ * 10 + i)
        for r, (q, v) in reads.items():
            body = json.dumps({"query": q, "variables": v})
            for k in range(60):
                t = time.perf_counter()
                h.request("POST", "/graphql", body, {"content-type": "application/json"})
                resp = h.getresponse(); data = resp.read()
                dt = time.perf_counter() - t
                if k == 0:
                    assert b'"errors"' not in data, data[:300]
                    assert answers.setdefault(r, data) == data, f"{b} answers {r} differently"
                if k >= 10: res[(b, r)].append(dt)
        p.terminate(); p.wait()
for r in reads:
    for b in bins:
        xs = res[(b, r)]
        print(f"{r:16} {os.path.basename(b):10} p50 {statistics.median(xs)*1000:7.1f} ms  n={len(xs)}")
