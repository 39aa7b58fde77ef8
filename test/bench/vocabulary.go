package main

// The word lists the catalog corpus is made of (generator.go). Each list is
// ordered from the most to the least common entry: the generator draws from
// it with a Zipf-like weight, so that a few terms are everywhere and most are
// rare, as in a real catalog.

// techs are the software packages are built around; a name part, and the
// subject of the first sentence of a description.
var techs = []string{
	"postgres", "redis", "kafka", "mysql", "mongodb", "elasticsearch", "prometheus", "nginx", "cassandra",
	"rabbitmq", "etcd", "vault", "grafana", "minio", "spark", "zookeeper", "mariadb", "memcached", "consul",
	"traefik", "istio", "jaeger", "keycloak", "airflow", "flink", "cockroachdb", "clickhouse", "couchbase",
	"nats", "pulsar", "tidb", "yugabyte", "argo", "tekton", "knative", "keda", "velero", "thanos", "loki",
	"fluentd", "fluentbit", "opensearch", "kibana", "logstash", "zipkin", "tempo", "cortex", "harbor", "envoy",
	"kong", "contour", "haproxy", "linkerd", "cilium", "calico", "metallb", "longhorn", "ceph", "rook",
	"openebs", "jenkins", "gitea", "sonarqube", "nexus", "superset", "jupyter", "kubeflow", "mlflow", "ray",
	"dask", "trino", "presto", "druid", "pinot", "hbase", "hadoop", "hive", "solr", "neo4j", "influxdb",
	"timescale", "victoriametrics", "questdb", "scylla", "dragonfly", "keydb", "valkey", "temporal",
	"camunda", "debezium", "nifi", "mosquitto", "emqx", "vernemq", "openldap", "dex", "oauth2", "spire",
	"falco", "trivy", "kyverno", "gatekeeper", "external-dns", "coredns", "certbot",
}

// modifiers are the second (or third) part of a name: what the package does
// around its tech.
var modifiers = []string{
	"operator", "ha", "cluster", "connect", "exporter", "proxy", "gateway", "controller", "agent", "backup",
	"sync", "mirror", "manager", "bridge", "adapter", "monitor", "scheduler", "autoscaler", "ingress",
	"registry", "cache", "stream", "sidecar", "webhook", "dashboard", "lite", "enterprise", "community",
	"cloud", "edge", "mesh", "replicator", "sentinel", "shard", "router", "broker", "collector", "injector",
	"provisioner", "migrator", "tuner", "auditor", "inspector", "balancer", "relay", "standby", "failover",
	"snapshot", "restore", "keeper", "watcher", "pool", "cron", "importer", "loader", "analyzer", "indexer",
	"scanner", "forwarder", "archiver",
}

// prefixes start some names, as vendors and projects brand their packages.
var prefixes = []string{
	"acme", "kube", "cloud", "open", "hyper", "nano", "micro", "smart", "rapid", "blue", "red", "green",
	"nova", "stellar", "polar", "iron", "silver", "quantum", "atlas", "apex", "zen", "swift", "bright", "deep",
	"fast", "meta", "omni", "prime", "pure", "solid", "terra", "ultra", "vertex", "vivid", "wave", "zeta",
	"cobalt", "crimson", "amber", "onyx",
}

// verbs are [third person, infinitive] pairs for descriptions.
var verbs = [][2]string{
	{"deploys", "deploy"}, {"manages", "manage"}, {"automates", "automate"}, {"runs", "run"},
	{"operates", "operate"}, {"provisions", "provision"}, {"scales", "scale"}, {"monitors", "monitor"},
	{"configures", "configure"}, {"upgrades", "upgrade"}, {"secures", "secure"}, {"orchestrates", "orchestrate"},
	{"replicates", "replicate"}, {"backs up", "back up"}, {"installs", "install"}, {"heals", "heal"},
	{"tunes", "tune"}, {"migrates", "migrate"}, {"observes", "observe"}, {"schedules", "schedule"},
	{"protects", "protect"}, {"exports", "export"}, {"federates", "federate"}, {"shards", "shard"},
	{"mirrors", "mirror"}, {"reconciles", "reconcile"}, {"audits", "audit"}, {"encrypts", "encrypt"},
}

var adjectives = []string{
	"highly available", "production-ready", "lightweight", "distributed", "cloud-native", "secure",
	"scalable", "fault-tolerant", "multi-tenant", "declarative", "self-healing", "resilient", "stateful",
	"managed", "clustered", "replicated", "encrypted", "observable", "elastic", "hybrid", "geo-distributed",
	"zero-downtime", "serverless", "event-driven", "immutable", "ephemeral", "federated", "sharded",
	"compliant", "hardened",
}

var nouns = []string{
	"clusters", "databases", "instances", "brokers", "caches", "pipelines", "workloads", "certificates",
	"backups", "metrics", "dashboards", "topics", "queues", "replicas", "shards", "volumes", "snapshots",
	"secrets", "gateways", "routes", "schedules", "jobs", "streams", "indexes", "tenants", "users", "buckets",
	"connectors", "policies", "alerts", "logs", "traces", "nodes", "namespaces", "services", "endpoints",
	"tables", "schemas", "models", "notebooks", "partitions", "listeners", "realms", "keyspaces", "ledgers",
}

var features = []string{
	"automated failover", "rolling upgrades", "point-in-time recovery", "TLS encryption",
	"horizontal scaling", "Prometheus metrics", "backups to object storage", "connection pooling",
	"automatic tuning", "role-based access control", "cross-region replication", "online resizing",
	"scheduled snapshots", "canary deployments", "audit logging", "health checks",
	"configuration drift detection", "disaster recovery", "multi-cluster federation", "custom alerting rules",
	"log shipping", "zero-downtime restarts", "secret rotation", "storage autoscaling",
	"blue-green deployments", "webhook notifications", "OpenTelemetry tracing", "LDAP integration",
	"single sign-on", "quota management", "rate limiting", "schema migrations", "change data capture",
	"workload isolation", "pod disruption budgets", "topology-aware placement", "cost reporting",
	"vulnerability scanning", "policy enforcement", "incremental backups",
}

var environments = []string{
	"production", "enterprise", "hybrid cloud", "multi-cloud", "edge", "air-gapped", "development",
	"regulated", "on-premises", "bare-metal", "telco", "financial", "IoT", "research",
}

// keywordList holds package keywords (Helm keywords, OLM CSV keywords).
var keywordList = []string{
	"database", "monitoring", "observability", "messaging", "streaming", "storage", "security", "sql",
	"networking", "backup", "cache", "logging", "analytics", "nosql", "tracing", "ci-cd", "gitops",
	"machine-learning", "search", "serverless", "identity", "service-mesh", "ingress", "big-data",
	"certificates", "secrets", "scheduling", "autoscaling", "policy", "compliance", "integration", "workflow",
	"batch", "iot", "edge", "dns", "data", "ai", "cost", "developer-tools",
}

// categories are OLM CSV categories.
var categories = []string{
	"Database", "Monitoring", "Streaming & Messaging", "Storage", "Security", "Networking",
	"Logging & Tracing", "Big Data", "AI/Machine Learning", "Developer Tools", "Integration & Delivery",
	"Application Runtime", "OpenShift Optional",
}

var capabilities = []string{"Basic Install", "Seamless Upgrades", "Full Lifecycle", "Deep Insights", "Auto Pilot"}

// companies provide packages and employ their maintainers; the domain is <company>.io.
var companies = []string{
	"acme", "globex", "initech", "umbrella", "hooli", "vandelay", "stark", "wayne", "wonka", "cyberdyne",
	"tyrell", "aperture", "soylent", "massive", "oscorp", "nakatomi", "gringotts", "monarch", "dunder",
	"piedpiper", "contoso", "fabrikam", "northwind", "adatum", "litware", "proseware", "tailspin",
	"wingtip", "woodgrove", "lucerne",
}

var firstNames = []string{
	"Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy", "Karl", "Laura",
	"Mallory", "Niaj", "Olivia", "Peggy", "Quentin", "Rupert", "Sybil", "Trent", "Ursula", "Victor", "Walter",
	"Xena", "Yusuf", "Zoe", "Aiko", "Bjorn", "Chiara", "Dmitri", "Emeka", "Fatima", "Goran", "Hana", "Ines",
	"Jonas", "Kemal", "Lena", "Mateo", "Noor",
}

var lastNames = []string{
	"Smith", "Johnson", "Garcia", "Miller", "Davis", "Martinez", "Lopez", "Wilson", "Anderson", "Thomas",
	"Taylor", "Moore", "Jackson", "Martin", "Lee", "Thompson", "White", "Harris", "Clark", "Lewis", "Robinson",
	"Walker", "Young", "Allen", "King", "Wright", "Scott", "Torres", "Nguyen", "Hill", "Flores", "Green",
	"Adams", "Nelson", "Baker", "Hall", "Rivera", "Campbell", "Mitchell", "Carter",
}

// kindSuffixes end the Kind of a CRD, after the CamelCase tech: PostgresCluster.
var kindSuffixes = []string{
	"Cluster", "Backup", "Restore", "User", "Topic", "Connector", "Instance", "Schedule", "Policy", "Gateway",
	"Route", "Database", "Bucket", "Pipeline", "Job", "Monitor", "Dashboard", "Certificate", "Replica",
	"Snapshot", "Config", "Tenant", "Index", "Sink", "Source",
}

// generatedNamespaces hold the generated packages; the fixtures go to
// namespaces of their own (fixtureNamespaces in generator.go).
var generatedNamespaces = []string{
	"platform", "data", "observability", "security", "networking", "storage", "ml", "partners",
	"incubator", "stable", "edge", "finance", "retail", "telecom", "labs", "infra", "dev", "staging",
	"acme", "research",
}

// licenses of Helm charts.
var licenses = []string{"Apache-2.0", "MIT", "BSD-3-Clause", "MPL-2.0", "GPL-3.0-only"}

// channelSets are the channels of an OLM package, the default first.
var channelSets = [][]string{
	{"stable"}, {"stable", "alpha"}, {"alpha"}, {"stable", "beta"}, {"stable", "fast", "candidate"},
	{"beta"}, {"stable", "preview"}, {"release-1.x", "alpha"},
}
