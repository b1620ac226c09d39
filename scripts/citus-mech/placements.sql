SELECT o.name, get_shard_id_for_distribution_column('apps', o.id) AS apps_shard, s.nodeport
FROM organizations o JOIN citus_shards s ON s.shardid = get_shard_id_for_distribution_column('apps', o.id)
ORDER BY o.name;
