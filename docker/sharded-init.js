// Initiates the config and shard replica sets, registers the shards and shards threadql's
// collections. Every shard key starts with discussion_id; every unique index starts with its key.
function connectWithRetry(uri) {
  for (let i = 0; i < 60; i++) {
    try { return new Mongo(uri); } catch (e) { sleep(1000); }
  }
  throw new Error("cannot reach " + uri);
}
function initiate(host, id, extra) {
  const db = connectWithRetry(host).getDB("admin");
  try { db.adminCommand({ replSetGetStatus: 1 }); return; } catch (e) { /* not initiated yet */ }
  db.adminCommand(Object.assign({ replSetInitiate: { _id: id, members: [{ _id: 0, host: host }] } }, extra || {}));
  for (let i = 0; i < 60 && !db.hello().isWritablePrimary; i++) sleep(1000);
}
initiate("config:27017", "cfg");
initiate("shard1:27017", "shard1");
initiate("shard2:27017", "shard2");

const admin = connectWithRetry("mongos:27017").getDB("admin");
for (let i = 0; i < 60; i++) {
  try { admin.runCommand({ ping: 1 }); break; } catch (e) { sleep(1000); }
}
admin.runCommand({ addShard: "shard1/shard1:27017" });
admin.runCommand({ addShard: "shard2/shard2:27017" });
admin.runCommand({ enableSharding: "threadql" });
// Discussions (and the embedded layout's comments, which live in them).
admin.runCommand({ shardCollection: "threadql.discussions", key: { _id: "hashed" } });
// The claims of discussion keys ({_id: key}): sharded on the key, so _id keeps it unique.
admin.runCommand({ shardCollection: "threadql.discussion_keys", key: { _id: "hashed" } });
// Reports ({_id: comment and reporter}): written and removed by _id.
admin.runCommand({ shardCollection: "threadql.reports", key: { _id: "hashed" } });
// One document per comment: the unique {discussion_id, slug} index is the shard key.
admin.runCommand({ shardCollection: "threadql.comments", key: { discussion_id: 1, slug: 1 }, unique: true });
// One vote per voter and comment: the unique {discussion_id, slug, voter} index is the shard key.
admin.runCommand({ shardCollection: "threadql.votes", key: { discussion_id: 1, slug: 1, voter: 1 }, unique: true });
// Tallies: one per comment voted on, ranked reads filter on the discussion.
admin.runCommand({ shardCollection: "threadql.tallies", key: { discussion_id: 1, slug: 1 }, unique: true });
// Import entries: the unique {discussion_id, source} index is the shard key.
admin.runCommand({ shardCollection: "threadql.imports", key: { discussion_id: 1, source: 1 }, unique: true });
// Rankings: one per discussion, read and written by _id.
admin.runCommand({ shardCollection: "threadql.rankings", key: { _id: "hashed" } });
// Buckets: the unique {discussion_id, page} index is the shard key.
admin.runCommand({ shardCollection: "threadql.comment_pages", key: { discussion_id: 1, page: 1 }, unique: true });
// The bucketed layout's copies of voted comments: by discussion and comment, their unique index.
admin.runCommand({ shardCollection: "threadql.voted_copies", key: { discussion_id: 1, slug: 1 }, unique: true });
// Notifications: every read names its recipient; `_id` holds it, so it stays unique per shard.
admin.runCommand({ shardCollection: "threadql.notifications", key: { recipient: "hashed" } });
// Follows: the fan-out reads a discussion's followers; `_id` holds the discussion.
admin.runCommand({ shardCollection: "threadql.follows", key: { discussion_id: "hashed" } });
print("sharded cluster ready");
