"""Why a connector or task FAILED, from its trace (pure: no event loop, no Kafka, no HTTP): a failure class that says
whether a restart can help, the cause in one line, and what the failure asks of the operator.

A status's trace is Java's stack trace of the exception that stopped it (``Throwable.printStackTrace``): the
exception's class and message, its frames, then each cause (``Caused by: <class>: <message>``). The whole cause chain
is read, innermost first, and the first exception that says something decides:

1. its class, by name (``EXCEPTIONS``: Connect's and Kafka's own, the JDK's, and the families of the well-known
   connectors: JDBC drivers, Debezium, the AWS SDKs, Elasticsearch, MongoDB, Schema Registry, Avro, Jackson);
2. else its message (``MESSAGES``: what generic exceptions such as ``SQLException``, ``ConnectException`` or an
   HTTP client's say: "password authentication failed", "Connection refused", "does not exist"...);
3. else the shape of its simple name (``...TimeoutException``, ``...AuthenticationException``...).

The innermost cause comes first because wrappers say little (``ConnectException: Exiting WorkerSinkTask due to
unrecoverable exception``) and some lie about it (Connect's JDBC sink wraps a refused password in a
``RetriableException``). A trace nothing decides is ``unknown``. The classes:

- ``transient``: the network, a timeout, a broker or a database unreachable or saying "not now": a restart, after a
  backoff, is what it needs;
- ``user``: configuration, credentials and permissions, something missing (a file, a table, a topic), data a converter
  or serializer cannot read, a schema that does not match, a plugin class missing: a restart fails the same way, so
  the operator must act (``Failure.action`` says what);
- ``unknown``: anything else (restarted by default: most failures nobody has seen before go away with a restart).

The corpus that holds this to real traces is ``tests/failure_traces/`` (``tests/test_failures.py``). Auto-restart
(``act/``) restarts by class; ``/fleet``, ``GET /events``, the status routes' ``?expand=failure`` and the metrics show
the failure.
"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass

from .codec import json_scalar

# The cause as shown: its first line, at most this many characters.
MAX_CAUSE_CHARS = 200


class FailureClass(enum.StrEnum):
    """Whether a restart can fix a failure."""

    TRANSIENT = "transient"
    USER = "user"
    UNKNOWN = "unknown"


class Family(enum.StrEnum):
    """What kind of cause a failure has: its class, and the action it needs."""

    NETWORK = "network"
    TIMEOUT = "timeout"
    UNAVAILABLE = "unavailable"
    CONFIGURATION = "configuration"
    CREDENTIALS = "credentials"
    PERMISSION = "permission"
    MISSING = "missing"
    DATA = "data"
    SCHEMA = "schema"
    PLUGIN = "plugin"

    @property
    def failure_class(self) -> FailureClass:
        """The family's class."""
        return (FailureClass.TRANSIENT if self in (Family.NETWORK, Family.TIMEOUT, Family.UNAVAILABLE)
                else FailureClass.USER)


ACTIONS = {
    Family.NETWORK: "The system at the other end could not be reached (refused, reset, unknown host): restarted "
                    "after a backoff until it answers; if it lasts, check that system and the network to it.",
    Family.TIMEOUT: "The other end did not answer in time: restarted after a backoff; if it lasts, check its load "
                    "and the network to it.",
    Family.UNAVAILABLE: "The other end said 'not now' (unavailable, throttled, a leader moving, a retriable error): "
                        "restarted after a backoff.",
    Family.CONFIGURATION: "Fix the connector's configuration (PUT /connectors/{name}/config): a restart fails the "
                          "same way.",
    Family.CREDENTIALS: "Fix the credentials the connector uses (user, password, key, certificate, trust store): a "
                        "restart fails the same way.",
    Family.PERMISSION: "Grant the connector's principal what it lacks (ACLs, grants, IAM policy, file permissions): "
                       "a restart fails the same way.",
    Family.MISSING: "Create what is missing (a file or directory, a table, a bucket, an index, a topic) or fix its "
                    "name in the configuration: a restart fails the same way.",
    Family.DATA: "A record cannot be read or written as configured (converter, serializer, a value the target "
                 "refuses): fix the data or the converter, or route bad records away (errors.tolerance, "
                 "errors.deadletterqueue.topic.name); a restart stops at the same record.",
    Family.SCHEMA: "The schema does not match what the other end expects (incompatible, missing field, wrong type): "
                   "evolve the schema or the target; a restart stops at the same record.",
    Family.PLUGIN: "The worker lacks a class or has another version of it: install the connector's plugin and its "
                   "dependencies (plugin.path) on every worker, then restart the worker.",
}
UNKNOWN_ACTION = ("Not a failure status-store knows: read the whole trace (GET /connectors/{name}/status). Restarted "
                  "by default (sidecar.restart.classes).")

# Exceptions by fully qualified class name. Subclasses a connector throws are named for themselves: a trace names
# the class, never its parents.
EXCEPTIONS: dict[str, Family] = {
    # Kafka's clients (org.apache.kafka.common.errors): retriable ones are transient, as Kafka says.
    "org.apache.kafka.common.errors.TimeoutException": Family.TIMEOUT,
    "org.apache.kafka.common.errors.RetriableException": Family.UNAVAILABLE,
    "org.apache.kafka.common.errors.NetworkException": Family.NETWORK,
    "org.apache.kafka.common.errors.DisconnectException": Family.NETWORK,
    "org.apache.kafka.common.errors.NotEnoughReplicasException": Family.UNAVAILABLE,
    "org.apache.kafka.common.errors.NotEnoughReplicasAfterAppendException": Family.UNAVAILABLE,
    "org.apache.kafka.common.errors.NotLeaderOrFollowerException": Family.UNAVAILABLE,
    "org.apache.kafka.common.errors.LeaderNotAvailableException": Family.UNAVAILABLE,
    "org.apache.kafka.common.errors.CoordinatorNotAvailableException": Family.UNAVAILABLE,
    "org.apache.kafka.common.errors.NotCoordinatorException": Family.UNAVAILABLE,
    "org.apache.kafka.common.errors.RebalanceInProgressException": Family.UNAVAILABLE,
    "org.apache.kafka.common.errors.ThrottlingQuotaExceededException": Family.UNAVAILABLE,
    "org.apache.kafka.common.config.ConfigException": Family.CONFIGURATION,
    "org.apache.kafka.common.errors.InvalidConfigurationException": Family.CONFIGURATION,
    "org.apache.kafka.common.errors.InvalidTopicException": Family.CONFIGURATION,
    "org.apache.kafka.common.errors.RecordTooLargeException": Family.CONFIGURATION,
    "org.apache.kafka.common.errors.AuthenticationException": Family.CREDENTIALS,
    "org.apache.kafka.common.errors.SaslAuthenticationException": Family.CREDENTIALS,
    "org.apache.kafka.common.errors.SslAuthenticationException": Family.CREDENTIALS,
    "org.apache.kafka.common.errors.IllegalSaslStateException": Family.CREDENTIALS,
    "org.apache.kafka.common.errors.AuthorizationException": Family.PERMISSION,
    "org.apache.kafka.common.errors.TopicAuthorizationException": Family.PERMISSION,
    "org.apache.kafka.common.errors.GroupAuthorizationException": Family.PERMISSION,
    "org.apache.kafka.common.errors.ClusterAuthorizationException": Family.PERMISSION,
    "org.apache.kafka.common.errors.TransactionalIdAuthorizationException": Family.PERMISSION,
    "org.apache.kafka.common.errors.SerializationException": Family.DATA,
    "org.apache.kafka.common.errors.RecordDeserializationException": Family.DATA,
    # Connect's own (org.apache.kafka.connect.errors); ConnectException itself is a wrapper: its message decides.
    "org.apache.kafka.connect.errors.RetriableException": Family.UNAVAILABLE,
    "org.apache.kafka.connect.errors.DataException": Family.DATA,
    "org.apache.kafka.connect.errors.SchemaBuilderException": Family.SCHEMA,
    "org.apache.kafka.connect.errors.SchemaProjectorException": Family.SCHEMA,
    # The JDK.
    "java.net.ConnectException": Family.NETWORK,
    "java.net.NoRouteToHostException": Family.NETWORK,
    "java.net.UnknownHostException": Family.NETWORK,
    "java.net.SocketException": Family.NETWORK,
    "java.net.PortUnreachableException": Family.NETWORK,
    "java.net.http.HttpConnectTimeoutException": Family.TIMEOUT,
    "java.net.http.HttpTimeoutException": Family.TIMEOUT,
    "java.net.SocketTimeoutException": Family.TIMEOUT,
    "java.util.concurrent.TimeoutException": Family.TIMEOUT,
    "java.nio.channels.ClosedChannelException": Family.NETWORK,
    "java.io.FileNotFoundException": Family.MISSING,
    "java.nio.file.NoSuchFileException": Family.MISSING,
    "java.nio.file.NotDirectoryException": Family.MISSING,
    "java.nio.file.AccessDeniedException": Family.PERMISSION,
    "javax.net.ssl.SSLHandshakeException": Family.CREDENTIALS,
    "javax.net.ssl.SSLPeerUnverifiedException": Family.CREDENTIALS,
    "java.security.cert.CertificateException": Family.CREDENTIALS,
    "java.security.cert.CertificateExpiredException": Family.CREDENTIALS,
    "sun.security.validator.ValidatorException": Family.CREDENTIALS,
    "sun.security.provider.certpath.SunCertPathBuilderException": Family.CREDENTIALS,
    "javax.security.auth.login.LoginException": Family.CREDENTIALS,
    "javax.security.auth.login.FailedLoginException": Family.CREDENTIALS,
    "java.lang.ClassNotFoundException": Family.PLUGIN,
    "java.lang.NoClassDefFoundError": Family.PLUGIN,
    "java.lang.NoSuchMethodError": Family.PLUGIN,
    "java.lang.NoSuchFieldError": Family.PLUGIN,
    "java.lang.AbstractMethodError": Family.PLUGIN,
    "java.lang.UnsupportedClassVersionError": Family.PLUGIN,
    "java.lang.IncompatibleClassChangeError": Family.PLUGIN,
    "java.lang.LinkageError": Family.PLUGIN,
    "java.lang.UnsatisfiedLinkError": Family.PLUGIN,
    # JDBC (java.sql): the SQLState classes the JDBC 4 hierarchy names.
    "java.sql.SQLTransientException": Family.UNAVAILABLE,
    "java.sql.SQLTransientConnectionException": Family.NETWORK,
    "java.sql.SQLTimeoutException": Family.TIMEOUT,
    "java.sql.SQLRecoverableException": Family.NETWORK,
    "java.sql.SQLInvalidAuthorizationSpecException": Family.CREDENTIALS,
    "java.sql.SQLSyntaxErrorException": Family.MISSING,
    "java.sql.SQLDataException": Family.DATA,
    "java.sql.SQLIntegrityConstraintViolationException": Family.DATA,
    "java.sql.SQLFeatureNotSupportedException": Family.CONFIGURATION,
    "java.sql.BatchUpdateException": Family.DATA,
    # MySQL's Connector/J, PostgreSQL's and MariaDB's drivers.
    "com.mysql.cj.jdbc.exceptions.CommunicationsException": Family.NETWORK,
    "com.mysql.cj.exceptions.CJCommunicationsException": Family.NETWORK,
    "com.mysql.cj.jdbc.exceptions.MySQLTimeoutException": Family.TIMEOUT,
    "com.mysql.cj.jdbc.exceptions.MysqlDataTruncation": Family.DATA,
    # Debezium and the MySQL binlog client it reads with.
    "io.debezium.jdbc.JdbcConnectionException": Family.NETWORK,
    "com.github.shyiko.mysql.binlog.network.AuthenticationException": Family.CREDENTIALS,
    # The AWS SDKs (S3, Kinesis, DynamoDB connectors): a client-side failure is the network; the services' own
    # errors are told by their status code (MESSAGES).
    "com.amazonaws.SdkClientException": Family.NETWORK,
    "software.amazon.awssdk.core.exception.SdkClientException": Family.NETWORK,
    "software.amazon.awssdk.core.exception.ApiCallTimeoutException": Family.TIMEOUT,
    "software.amazon.awssdk.core.exception.ApiCallAttemptTimeoutException": Family.TIMEOUT,
    "software.amazon.awssdk.services.s3.model.NoSuchBucketException": Family.MISSING,
    "software.amazon.awssdk.services.s3.model.NoSuchKeyException": Family.MISSING,
    # Apache HttpClient (Elasticsearch's low-level client, Schema Registry's, many sinks').
    "org.apache.http.conn.HttpHostConnectException": Family.NETWORK,
    "org.apache.http.conn.ConnectTimeoutException": Family.TIMEOUT,
    "org.apache.http.NoHttpResponseException": Family.NETWORK,
    "org.apache.http.ConnectionClosedException": Family.NETWORK,
    "org.apache.hc.client5.http.HttpHostConnectException": Family.NETWORK,
    "org.apache.hc.client5.http.ConnectTimeoutException": Family.TIMEOUT,
    "org.apache.hc.core5.http.NoHttpResponseException": Family.NETWORK,
    # MongoDB's Java driver.
    "com.mongodb.MongoTimeoutException": Family.TIMEOUT,
    "com.mongodb.MongoSocketOpenException": Family.NETWORK,
    "com.mongodb.MongoSocketReadException": Family.NETWORK,
    "com.mongodb.MongoSocketReadTimeoutException": Family.TIMEOUT,
    "com.mongodb.MongoSocketWriteException": Family.NETWORK,
    "com.mongodb.MongoNotPrimaryException": Family.UNAVAILABLE,
    "com.mongodb.MongoNodeIsRecoveringException": Family.UNAVAILABLE,
    "com.mongodb.MongoSecurityException": Family.CREDENTIALS,
    "com.mongodb.MongoConfigurationException": Family.CONFIGURATION,
    "org.bson.json.JsonParseException": Family.DATA,
    "org.bson.BsonInvalidOperationException": Family.DATA,
    # Cassandra's driver.
    "com.datastax.oss.driver.api.core.AllNodesFailedException": Family.NETWORK,
    "com.datastax.oss.driver.api.core.NoNodeAvailableException": Family.NETWORK,
    "com.datastax.oss.driver.api.core.DriverTimeoutException": Family.TIMEOUT,
    "com.datastax.oss.driver.api.core.servererrors.UnavailableException": Family.UNAVAILABLE,
    "com.datastax.oss.driver.api.core.servererrors.WriteTimeoutException": Family.TIMEOUT,
    "com.datastax.oss.driver.api.core.servererrors.ReadTimeoutException": Family.TIMEOUT,
    "com.datastax.oss.driver.api.core.servererrors.InvalidQueryException": Family.SCHEMA,
    "com.datastax.oss.driver.api.core.auth.AuthenticationException": Family.CREDENTIALS,
    "com.datastax.oss.driver.api.core.servererrors.UnauthorizedException": Family.PERMISSION,
    # Redis (Jedis).
    "redis.clients.jedis.exceptions.JedisConnectionException": Family.NETWORK,
    "redis.clients.jedis.exceptions.JedisAccessControlException": Family.CREDENTIALS,
    # Serialization: Jackson, Avro, Protobuf, Schema Registry's converters.
    "com.fasterxml.jackson.core.JsonParseException": Family.DATA,
    "com.fasterxml.jackson.core.io.JsonEOFException": Family.DATA,
    "com.fasterxml.jackson.databind.JsonMappingException": Family.DATA,
    "com.fasterxml.jackson.databind.exc.MismatchedInputException": Family.DATA,
    "com.fasterxml.jackson.databind.exc.InvalidFormatException": Family.DATA,
    "com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException": Family.SCHEMA,
    "org.apache.avro.AvroTypeException": Family.SCHEMA,
    "org.apache.avro.AvroRuntimeException": Family.DATA,
    "org.apache.avro.SchemaParseException": Family.SCHEMA,
    "org.apache.avro.UnresolvedUnionException": Family.SCHEMA,
    "com.google.protobuf.InvalidProtocolBufferException": Family.DATA,
    "io.confluent.kafka.schemaregistry.client.rest.exceptions.RestClientException": Family.SCHEMA,
}

# Messages of generic exceptions (and of those whose class says nothing), as regular expressions, first match wins:
# credentials and permissions before the network ("Access denied for user ..." is no outage), schemas before what is
# missing ("subject not found"), everything before "not now".
MESSAGES: tuple[tuple[re.Pattern[str], Family], ...] = tuple((re.compile(p, re.IGNORECASE), f) for p, f in (
    (r"password authentication failed|authentication failed|invalid credentials|bad credentials|"
     r"unable to authenticate|access denied for user|login failed for user|invalid username or password|"
     r"(status code|error code|http)[: ]+401\b|\b401 unauthorized|\bunauthorized\b(?! for)|not authenticated|"
     r"invalid (access key|api key|token)|security token included in the request is invalid|"
     r"signature ?does ?not ?match|expired ?token|certificate (has )?expired|"
     r"unable to find valid certification path|pkix path building failed", Family.CREDENTIALS),
    (r"permission denied|access ?denied|not authorized|is unauthorized for|insufficient privileges|must be owner of|"
     r"(status code|error code|http)[: ]+403\b|\b403 forbidden|\bforbidden\b|security_exception",
     Family.PERMISSION),
    (r"class not found|could not initialize class|failed to find any class that implements|"
     r"no suitable driver", Family.PLUGIN),
    (r"schema being registered is incompatible|incompatible schema|schema .*not found|subject .*not found|"
     r"column .*(does not exist|not found)|unknown column|no such column|strict_dynamic_mapping_exception",
     Family.SCHEMA),
    (r"does not exist|doesn't exist|no such (file|directory|table|bucket|index|key|topic)|\bnot found\b|"
     r"unknown (database|table|topic)|index_not_found_exception|nosuchbucket|"
     r"(status code|error code|http)[: ]+404\b|couldn't find or create file|"
     r"could not find first log file name in binary log", Family.MISSING),
    (r"invalid (value|configuration|config)|missing required configuration|configuration .* is invalid|"
     r"unknown configuration|is not a valid", Family.CONFIGURATION),
    (r"unknown magic byte|failed to deserialize|error deserializing|serialization error|"
     r"converting byte\[\] to kafka connect data failed|mapper_parsing_exception|document_parsing_exception|"
     r"malformed|cannot be cast to|value too long|out of range value|invalid input syntax|duplicate key",
     Family.DATA),
    (r"connection refused|connection reset|broken pipe|no route to host|network is unreachable|"
     r"communications link failure|connection (was )?closed|could not connect|unable to connect|"
     r"failed to connect|connect to .* failed|unknown host|name or service not known|"
     r"temporary failure in name resolution|the connection attempt failed|connection (is )?not available|"
     r"no connection available|unable to execute http request", Family.NETWORK),
    (r"timed out|timeout (expired|exceeded)|read timeout|deadline exceeded", Family.TIMEOUT),
    (r"(status code|error code|http)[: ]+(429|500|502|503|504)\b|\b(502 bad gateway|503 service unavailable|"
     r"504 gateway timeout)|service unavailable|too many requests|throttl|slow ?down|server is busy|"
     r"the database system is (starting up|shutting down)|too many connections|deadlock|lock wait timeout|"
     r"try again|temporarily unavailable|no available (node|server)s?|cluster_block_exception|"
     r"es_rejected_execution_exception", Family.UNAVAILABLE),
))

# Simple class names by their shape, after the class and the message said nothing.
SHAPES: tuple[tuple[re.Pattern[str], Family], ...] = tuple((re.compile(p), f) for p, f in (
    (r"Timeout(Exception|Error)$", Family.TIMEOUT),
    (r"(Authentication|Login|Credential|Credentials)(Exception|Error)$", Family.CREDENTIALS),
    (r"(Authorization|AccessDenied|Permission|Forbidden|Unauthorized)(Exception|Error)$", Family.PERMISSION),
    (r"(Serialization|Deserialization|Parse|Parsing|Conversion|Converter)(Exception|Error)$", Family.DATA),
    (r"Schema\w*(Exception|Error)$", Family.SCHEMA),
    (r"Config\w*(Exception|Error)$", Family.CONFIGURATION),
    (r"(Connection|Socket|Network|Communication|Communications)(Exception|Error)$", Family.NETWORK),
    (r"(Unavailable|Retriable|Retryable|Transient|Throttl\w*)(Exception|Error)$", Family.UNAVAILABLE),
))

# One exception in a trace: a class name, then ": message", "[...]" (Elasticsearch's toString) or nothing.
_HEADER = re.compile(r"(?P<cls>[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+|[A-Z][\w$]*(?=\[))(?P<rest>(?::|\[).*)?$")
_CAUSED_BY = "Caused by: "
# A frame of a stack trace, and what stands for frames: the end of an exception's message.
_FRAME = re.compile(r"\s+(at |\.\.\. \d+ (more|common frames omitted)|Suppressed: )")


@dataclass(frozen=True, slots=True)
class Thrown:
    """One exception of a trace's cause chain: its class (as the trace names it) and its message (None: none)."""

    exception: str
    message: str | None

    @property
    def simple_name(self) -> str:
        """The class's simple name (``NoSuchFileException``)."""
        return self.exception.rsplit(".", 1)[-1]


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a status FAILED: its class, the family of its cause (None: unknown), the cause in one line, the exception
    that decided (None: nothing did) and what it needs of the operator."""

    failure_class: FailureClass
    family: Family | None
    cause: str | None
    decided_by: str | None

    @property
    def action(self) -> str:
        """What the failure needs of the operator."""
        return ACTIONS[self.family] if self.family is not None else UNKNOWN_ACTION

    def fields(self) -> dict[str, str | None]:
        """As ``/fleet`` and the status routes show it."""
        return {"class": self.failure_class.value, "family": self.family.value if self.family is not None else None,
                "cause": self.cause, "action": self.action}


NO_TRACE = Failure(FailureClass.UNKNOWN, None, None, None)


def cause_chain(trace: str) -> list[Thrown]:
    """The exceptions of a trace, outermost first: the first line's, then each ``Caused by:`` (suppressed exceptions,
    indented, are not causes). A message runs over every line up to the exception's first frame (``\tat ...``)."""
    chain: list[Thrown] = []
    message: list[str] | None = None
    for line in trace.splitlines():
        if line.startswith(_CAUSED_BY) or not chain:
            header = _HEADER.match(line.removeprefix(_CAUSED_BY).strip())
            if header is None:
                if not chain:
                    return []
            else:
                rest = header.group("rest") or ""
                text = rest[1:].strip() if rest.startswith(":") else rest.strip()
                message = [text] if text else []
                chain.append(Thrown(header.group("cls"), text or None))
                continue
        if _FRAME.match(line):
            message = None
        elif message is not None and line.strip():
            message.append(line.strip())
            chain[-1] = Thrown(chain[-1].exception, "\n".join(message))
    return chain


def family_of(thrown: Thrown) -> Family | None:
    """What one exception says of its cause: by its class, its message, or its name's shape; None: nothing."""
    family = EXCEPTIONS.get(thrown.exception)
    if family is not None:
        return family
    if thrown.message:
        for pattern, said in MESSAGES:
            if pattern.search(thrown.message):
                return said
    for pattern, said in SHAPES:
        if pattern.search(thrown.simple_name):
            return said
    return None


@functools.lru_cache(maxsize=4096)
def classify(trace: str | None) -> Failure:
    """A FAILED status's failure, from its trace (see the module's docstring). Cached: a storm fails many tasks with
    one trace, and every view of the fleet asks again."""
    if not trace:
        return NO_TRACE
    chain = cause_chain(trace)
    if not chain:
        line = trace.strip().splitlines()[0] if trace.strip() else None
        return Failure(FailureClass.UNKNOWN, None, _cut(line), None)
    cause = _cause(chain)
    for thrown in reversed(chain):
        family = family_of(thrown)
        if family is not None:
            return Failure(family.failure_class, family, cause, thrown.exception)
    return Failure(FailureClass.UNKNOWN, None, cause, None)


def _cause(chain: list[Thrown]) -> str | None:
    """The innermost message in one line (``NoSuchFileException: /data/out.txt``), or the innermost class without
    one."""
    for thrown in reversed(chain):
        if thrown.message:
            return _cut(f"{thrown.simple_name}: {' '.join(thrown.message.split())}")
    return _cut(chain[-1].simple_name)


def _cut(line: str | None) -> str | None:
    if line is None:
        return None
    line = line.strip()
    return line if len(line) <= MAX_CAUSE_CHARS else line[:MAX_CAUSE_CHARS - 1] + "…"


@functools.lru_cache(maxsize=4096)
def failure_json(trace: str | None) -> str:
    """A FAILED status's failure (``classify``) as JSON text, strings written as Connect's JSON writes them."""
    return "{" + ",".join(f'"{name}":{json_scalar(value)}' for name, value in classify(trace).fields().items()) + "}"
