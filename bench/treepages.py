"""The page reads of the harness's tree (20 threads × 4 levels of 10 replies) in every bucketed
discussion a harness run left in the database: per level, the pages that hold the level's
windows (each parent's first 11 replies: one more says whether more follow), their sum (what a
read that filters each level on the database reads) and the distinct pages (what a request that
keeps the pages it read reads).

    python3 bench/treepages.py "mongodb://127.0.0.1:27099/?directConnection=true"
"""
import sys
from collections import defaultdict
from pymongo import MongoClient

c = MongoClient(sys.argv[1])
name = [n for n in c.list_database_names() if n.startswith("threadql_bench")][0]
db = c[name]
for d in db.discussions.find({"layout": "bucketed"}).sort("comment_count", 1):
    page_of, kids, tops = {}, defaultdict(list), []
    for p in db.comment_pages.find({"discussion_id": d["_id"]}, {"page": 1, "comments.slug": 1, "comments.parent": 1, "comments.full_slug": 1}):
        for x in p["comments"]:
            page_of[x["slug"]] = p["page"]
            (kids[x["parent"]] if x.get("parent") else tops).append(x)
    key = lambda x: x["full_slug"].rsplit("/", 1)[-1]
    tops.sort(key=key)
    for k in kids.values():
        k.sort(key=key)
    level, per, distinct = tops[:20], [], set()
    for _ in range(4):
        pages, nxt = set(), []
        for parent in level:
            window = kids[parent["slug"]][:11]
            nxt.extend(window[:10])
            pages.update(page_of[x["slug"]] for x in window)
        per.append(len(pages))
        distinct |= pages
        level = nxt
    print(f"{d['comment_count']:>7} comments: pages per level {per}, page reads {sum(per)}, distinct pages {len(distinct)}")
