"""Two (or more) `threadql` server binaries on one loaded database, in turns: each, four times,
serves one keep-alive client posting a conversation of 160 posts into the smallest bucketed
discussion (30 % top-level, 70 % replies to comments posted earlier in the turn; the first 10
not timed), and the post latencies are compared. Taking turns on the same stored data keeps
the noise of separate loads and of the machine out of the comparison (see BENCHMARKS.md).

    threadql-bench --mongodb-uri "mongodb://127.0.0.1:27099/?directConnection=true" \
        --layouts bucketed --sizes 1000 --reads direct-link --no-writes
    python3 bench/abw.py "mongodb://127.0.0.1:27099/?directConnection=true" OLD_BIN NEW_BIN
"""
import http.client, json, os, random, statistics, subprocess, sys, time
from pymongo import MongoClient

URI = sys.argv[1]
bins = sys.argv[2:]
client = MongoClient(URI)
name = [n for n in client.list_database_names() if n.startswith("threadql_bench")][0]
discussion = client[name].discussions.find_one({"layout": "bucketed"}, sort=[("comment_count", 1)])
D = discussion["_id"]
SECRET = "x" * 40
POST = "mutation($d: ID!, $p: String, $t: String!) { postComment(input: {discussionId: $d, parentSlug: $p, text: $t}) { slug } }"


def env(port):
    return dict(os.environ, THREADQL_MONGODB_URI=URI, THREADQL_DATABASE=name,
                THREADQL_LISTEN=f"127.0.0.1:{port}", THREADQL_JWT_SECRET=SECRET, THREADQL_LOG="warn",
                THREADQL_RATE_LIMIT="off", THREADQL_RATE_LIMIT_ANON="off")


minted = subprocess.run([bins[0], "token", "--sub", "ab-writer", "--name", "Writer"], env=env(1),
                        capture_output=True, text=True, check=True)
token = minted.stdout.strip().split()[-1]
res = {i: [] for i in range(len(bins))}
rng = random.Random(7)
for turn in range(4):
    for i, binary in enumerate(bins):
        port = 19100 + i
        server = subprocess.Popen([binary, "serve"], env=env(port), stdout=subprocess.DEVNULL)
        conn = None
        for _ in range(100):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port)
                conn.request("GET", "/health")
                conn.getresponse().read()
                break
            except OSError:
                time.sleep(0.2)
        own = []
        for n in range(160):
            parent = None if (not own or rng.random() < 0.3) else rng.choice(own)
            body = json.dumps({"query": POST, "variables": {"d": D, "p": parent, "t": f"turn {turn} post {n}"}})
            start = time.perf_counter()
            conn.request("POST", "/graphql", body,
                         {"content-type": "application/json", "authorization": "Bearer " + token})
            data = json.loads(conn.getresponse().read())
            elapsed = time.perf_counter() - start
            assert "errors" not in data, data
            own.append(data["data"]["postComment"]["slug"])
            if n >= 10:
                res[i].append(elapsed * 1000)
        server.terminate()
        server.wait()
for i, binary in enumerate(bins):
    print(f"{binary}: post p50 {statistics.median(res[i]):.2f} ms, mean {statistics.mean(res[i]):.2f} ms "
          f"over {len(res[i])} posts")
