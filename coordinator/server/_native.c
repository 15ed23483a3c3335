/* The steady classic Heartbeat and the steady ConsumerGroupHeartbeat in one call: frame in, reply bytes
 * out (coordinator/server/fast_heartbeat.py).
 *
 * HeartbeatPath.answer(data, client_id, limit) takes what one read of a connection brought and
 * returns (reply frame, client id) when that is exactly one Heartbeat the Python path would answer
 * with NONE or REBALANCE_IN_PROGRESS after moving a member's session deadline; it then has done
 * what the Python path does (the deadline, the request metrics). Anything else -- another API, a
 * frame it does not fully understand, an unknown group or member, a static member's heartbeat, a
 * partition not ACTIVE, another generation, an Empty group -- returns None with nothing changed,
 * and the caller runs the general path, which stays the reference. answer_frame does the same for
 * a frame without its size prefix (frames split out of a larger read).
 *
 * It reads the core's own objects (the coordinator's `states` and `shards`, a shard's `groups` and
 * `events`, a group's `members`, `generation` and `state`, a member's `session_timeout_ms`) and
 * writes only `member.deadline` and the counters of coordinator/observability/metrics.py's
 * RequestStats; it runs on the event loop's thread with the interpreter lock held, as the Python
 * path does.
 *
 * ConsumerGroupHeartbeat (v0/v1) takes the same path when built with `consumer`: a frame whose every
 * optional field is null (rebalance timeout -1), the narrowest case of ConsumerMachine.steady_heartbeat,
 * re-checked here condition by condition against the core's objects as that method checks them (rather
 * than a flag the machine keeps: every change to a group or member would have to clear it, and a
 * missed one would answer stale). It writes what that method writes -- the member's entry in the
 * machine's `session` dict, the machine's `topics` -- and answers the bytes _steady encodes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define HEARTBEAT 12
#define CONSUMER_HEARTBEAT 68
#define MAX_VERSION 4
#define N_BUCKETS_MAX 64

static PyObject *s_states, *s_shards, *s_events, *s_groups, *s_members, *s_generation, *s_state,
    *s_session_timeout_ms, *s_deadline, *one;
/* what the consumer path reads (names as in coordinator/core/consumer/ and coordinator/server/node.py) */
static PyObject *s_consumer, *s_current, *s_assignment, *s_member_epoch, *s_metadata, *s_epoch, *s_target_epoch,
    *s_assignment_epoch, *s_metadata_version, *s_subscribed_regexes, *s_classic_member_metadata, *s_client_id,
    *s_client_host, *s_settings, *s_group_configs, *s_heartbeat_interval_ms, *s_session, *s_topics,
    *s_topics_image, *s_catalog, *s_version;

typedef struct {
    PyObject_HEAD
    PyObject *coordinator;
    long partitions;
    PyObject *active;        /* PartitionState.ACTIVE */
    PyTypeObject *group_type; /* ClassicGroup: only that exact type takes this path */
    PyObject *empty;         /* GroupState.EMPTY */
    PyObject *preparing;     /* GroupState.PREPARING_REBALANCE */
    int max_version;
    PyObject *bodies[MAX_VERSION + 1][2]; /* encoded response bodies: [version][0 none, 1 rebalance] */
    PyObject *answered;      /* RequestStats.answered */
    PyObject *keys[2];       /* (12, ErrorCode.none), (12, ErrorCode.rebalance_in_progress) */
    PyObject *buckets;       /* RequestStats.buckets[12] */
    PyObject *seconds;       /* RequestStats.seconds */
    PyObject *api_key;       /* 12, as RequestStats.seconds keys it */
    double bounds[N_BUCKETS_MAX];
    Py_ssize_t n_bounds;
    /* the steady ConsumerGroupHeartbeat: all NULL when the consumer path is off */
    PyObject *node;                    /* the Node: its cached topics image and catalog */
    PyTypeObject *consumer_group_type; /* ConsumerGroup, exactly */
    PyObject *stable;                  /* MemberState.STABLE */
    PyObject *consumer_key;            /* (68, the steady answer's error code), as RequestStats keys it */
    PyObject *consumer_buckets;        /* RequestStats.buckets[68] */
    PyObject *consumer_api_key;        /* 68 */
} HeartbeatPath;

static double monotonic_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int64_t monotonic_ms(void) { /* as time.monotonic_ns() // 1_000_000 */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int32_t be32(const unsigned char *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3]);
}

static inline int16_t be16(const unsigned char *p) { return (int16_t)(((uint16_t)p[0] << 8) | p[1]); }

/* An unsigned varint of at most 5 bytes; -1 when it runs past `end` or is longer. */
static inline int64_t uvarint(const unsigned char **pos, const unsigned char *end) {
    uint64_t value = 0;
    for (int shift = 0; shift <= 28; shift += 7) {
        if (*pos >= end) return -1;
        unsigned char b = *(*pos)++;
        value |= (uint64_t)(b & 0x7F) << shift;
        if (!(b & 0x80)) return (int64_t)value;
    }
    return -1;
}

/* A string field: sets *s and *n (*n = -1: null); returns 0, or -1 when the frame cannot hold it. */
static inline int string_field(const unsigned char **pos, const unsigned char *end, int compact,
                               const unsigned char **s, Py_ssize_t *n) {
    int64_t len;
    if (compact) {
        len = uvarint(pos, end);
        if (len < 0) return -1;
        len -= 1;
    } else {
        if (end - *pos < 2) return -1;
        len = be16(*pos);
        *pos += 2;
        if (len < -1) return -1;
    }
    if (len > end - *pos) return -1;
    *s = *pos;
    *n = (Py_ssize_t)len;
    if (len > 0) *pos += len;
    return 0;
}

/* Kafka's partition of a group: abs(Java String.hashCode) mod n, Utils.abs(MIN_VALUE) = 0. */
static long java_partition(PyObject *str, long partitions) {
    uint32_t h = 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(str);
    int kind = PyUnicode_KIND(str);
    const void *data = PyUnicode_DATA(str);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (c > 0xFFFF) { /* two UTF-16 code units, as Java holds it */
            c -= 0x10000;
            h = 31 * h + (0xD800 + (c >> 10));
            h = 31 * h + (0xDC00 + (c & 0x3FF));
        } else {
            h = 31 * h + c;
        }
    }
    int32_t signed_h = (int32_t)h;
    int64_t a = signed_h == INT32_MIN ? 0 : (signed_h < 0 ? -(int64_t)signed_h : signed_h);
    return (long)(a % partitions);
}

/* Borrowed attribute reads would need the object to stay alive; these return new references. */
static PyObject *attr(PyObject *o, PyObject *name) { return PyObject_GetAttr(o, name); }

static int count(HeartbeatPath *self, PyObject *key, PyObject *buckets, PyObject *api_key, double seconds) {
    PyObject *old = PyDict_GetItemWithError(self->answered, key);
    if (old == NULL && PyErr_Occurred()) return -1;
    PyObject *n = old ? PyNumber_Add(old, one) : PyLong_FromLong(1);
    if (n == NULL || PyDict_SetItem(self->answered, key, n) < 0) { Py_XDECREF(n); return -1; }
    Py_DECREF(n);
    /* bisect_left over the bucket bounds */
    Py_ssize_t lo = 0, hi = self->n_bounds;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (self->bounds[mid] < seconds) lo = mid + 1; else hi = mid;
    }
    PyObject *b = PyList_GetItem(buckets, lo);
    if (b == NULL) return -1;
    PyObject *nb = PyNumber_Add(b, one);
    if (nb == NULL) return -1;
    PyList_SetItem(buckets, lo, nb); /* steals nb */
    PyObject *total = PyDict_GetItemWithError(self->seconds, api_key);
    if (total == NULL) return PyErr_Occurred() ? -1 : 0;
    PyObject *sum = PyFloat_FromDouble(PyFloat_AsDouble(total) + seconds);
    if (sum == NULL || PyDict_SetItem(self->seconds, api_key, sum) < 0) { Py_XDECREF(sum); return -1; }
    Py_DECREF(sum);
    return 0;
}

/* The heart of both entry points: `frame` is the request without its size prefix. Returns a new
 * (reply, client id) tuple, Py_None (new reference) for "not mine", or NULL with an exception. */
static PyObject *classic_impl(HeartbeatPath *self, const unsigned char *frame, Py_ssize_t size,
                              PyObject *client_id) {
    double started = monotonic_s();
    const unsigned char *end = frame + size, *pos = frame + 10;
    int version = be16(frame + 2);
    if (version < 0 || version > self->max_version) Py_RETURN_NONE;
    int32_t correlation_id = be32(frame + 4);
    int16_t cid_len = be16(frame + 8);
    const unsigned char *cid = pos;
    if (cid_len < -1 || cid_len > end - pos) Py_RETURN_NONE;
    if (cid_len > 0) pos += cid_len;
    int flexible = version >= 4;
    if (flexible) { /* the header's tag buffer: only an empty one here */
        if (pos >= end || *pos != 0) Py_RETURN_NONE;
        pos++;
    }
    const unsigned char *gid, *mid, *iid;
    Py_ssize_t gid_n, mid_n, iid_n = -1;
    if (string_field(&pos, end, flexible, &gid, &gid_n) < 0 || gid_n <= 0) Py_RETURN_NONE;
    if (end - pos < 4) Py_RETURN_NONE;
    int32_t generation = be32(pos);
    pos += 4;
    if (string_field(&pos, end, flexible, &mid, &mid_n) < 0 || mid_n < 0) Py_RETURN_NONE;
    if (version >= 3 && (string_field(&pos, end, flexible, &iid, &iid_n) < 0 || iid_n != -1))
        Py_RETURN_NONE; /* a static member's heartbeat is validated by the general path */
    if (flexible) {
        if (pos >= end || *pos != 0) Py_RETURN_NONE;
        pos++;
    }
    if (pos != end) Py_RETURN_NONE;

    /* The strings, decoded strictly as the general path does (invalid UTF-8 is its to reject). */
    PyObject *new_client_id = NULL, *group_id = NULL, *member_id = NULL, *coordinator_list = NULL,
             *shard = NULL, *obj = NULL, *group = NULL, *member = NULL, *result = NULL;
    if (cid_len < 0) {
        new_client_id = Py_NewRef(Py_None);
    } else {
        Py_ssize_t known_n;
        const char *known = PyUnicode_Check(client_id) ? PyUnicode_AsUTF8AndSize(client_id, &known_n) : NULL;
        if (known == NULL) PyErr_Clear();
        if (known != NULL && known_n == cid_len && memcmp(known, cid, cid_len) == 0) {
            new_client_id = Py_NewRef(client_id);
        } else {
            new_client_id = PyUnicode_DecodeUTF8((const char *)cid, cid_len, NULL);
            if (new_client_id == NULL) goto not_mine;
        }
    }
    group_id = PyUnicode_DecodeUTF8((const char *)gid, gid_n, NULL);
    if (group_id == NULL) goto not_mine;
    member_id = PyUnicode_DecodeUTF8((const char *)mid, mid_n, NULL);
    if (member_id == NULL) goto not_mine;

    long p = java_partition(group_id, self->partitions);
    coordinator_list = attr(self->coordinator, s_states);
    if (coordinator_list == NULL) goto error;
    if (!PyList_Check(coordinator_list) || p >= PyList_GET_SIZE(coordinator_list)
        || PyList_GET_ITEM(coordinator_list, p) != self->active)
        goto not_mine; /* loading, failed or not ours: the general path answers that */
    Py_DECREF(coordinator_list);
    coordinator_list = attr(self->coordinator, s_shards);
    if (coordinator_list == NULL) goto error;
    if (!PyList_Check(coordinator_list) || p >= PyList_GET_SIZE(coordinator_list)) goto not_mine;
    shard = Py_NewRef(PyList_GET_ITEM(coordinator_list, p));
    obj = attr(shard, s_events);
    if (obj == NULL) goto error;
    int pending_events = PyObject_IsTrue(obj); /* events the general path would flush now */
    Py_CLEAR(obj);
    if (pending_events != 0) goto not_mine_or_error;
    obj = attr(shard, s_groups);
    if (obj == NULL) goto error;
    if (!PyDict_CheckExact(obj)) goto not_mine;
    group = PyDict_GetItemWithError(obj, group_id);
    if (group == NULL) { if (PyErr_Occurred()) goto error; goto not_mine; }
    Py_INCREF(group);
    Py_CLEAR(obj);
    if (Py_TYPE(group) != self->group_type) goto not_mine; /* a consumer group's classic member, ... */
    obj = attr(group, s_members);
    if (obj == NULL) goto error;
    if (!PyDict_CheckExact(obj)) goto not_mine;
    member = PyDict_GetItemWithError(obj, member_id);
    if (member == NULL) { if (PyErr_Occurred()) goto error; goto not_mine; }
    Py_INCREF(member);
    Py_CLEAR(obj);
    obj = attr(group, s_generation);
    if (obj == NULL) goto error;
    if (!PyLong_CheckExact(obj)) goto not_mine;
    int overflow;
    long long current = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow || current != generation) goto not_mine; /* ILLEGAL_GENERATION: the general path */
    Py_CLEAR(obj);
    obj = attr(group, s_state);
    if (obj == NULL) goto error;
    if (obj == self->empty) goto not_mine;
    int rebalance = obj == self->preparing;
    Py_CLEAR(obj);

    /* Valid: move the session deadline, as ClassicMachine.heartbeat does. */
    obj = attr(member, s_session_timeout_ms);
    if (obj == NULL) goto error;
    if (!PyLong_CheckExact(obj)) goto not_mine;
    PyObject *now = PyLong_FromLongLong(monotonic_ms());
    if (now == NULL) goto error;
    PyObject *deadline = PyNumber_Add(now, obj);
    Py_DECREF(now);
    if (deadline == NULL) goto error;
    int set = PyObject_SetAttr(member, s_deadline, deadline);
    Py_DECREF(deadline);
    if (set < 0) goto error;

    /* The reply: size, correlation id, (flexible: an empty header tag buffer), the encoded body. */
    PyObject *body = self->bodies[version][rebalance];
    Py_ssize_t body_n = PyBytes_GET_SIZE(body), header_n = 8 + flexible;
    PyObject *reply = PyBytes_FromStringAndSize(NULL, header_n + body_n);
    if (reply == NULL) goto error;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(reply);
    uint32_t n = (uint32_t)(header_n - 4 + body_n), c = (uint32_t)correlation_id;
    out[0] = n >> 24; out[1] = n >> 16; out[2] = n >> 8; out[3] = n;
    out[4] = c >> 24; out[5] = c >> 16; out[6] = c >> 8; out[7] = c;
    if (flexible) out[8] = 0;
    memcpy(out + header_n, PyBytes_AS_STRING(body), body_n);
    if (count(self, self->keys[rebalance], self->buckets, self->api_key, monotonic_s() - started) < 0) {
        Py_DECREF(reply);
        goto error;
    }
    result = PyTuple_Pack(2, reply, new_client_id);
    Py_DECREF(reply);
    goto done;

not_mine_or_error:
    if (PyErr_Occurred()) goto error;
not_mine:
    PyErr_Clear(); /* a failed strict decode: the general path rejects that frame itself */
    result = Py_NewRef(Py_None);
    goto done;
error:
    result = NULL;
done:
    Py_XDECREF(new_client_id);
    Py_XDECREF(group_id);
    Py_XDECREF(member_id);
    Py_XDECREF(coordinator_list);
    Py_XDECREF(shard);
    Py_XDECREF(obj);
    Py_XDECREF(group);
    Py_XDECREF(member);
    return result;
}

/* The new references the consumer path reads, released together at its end. */
typedef struct {
    PyObject *refs[48]; /* consumer_impl holds at most 37 */
    int n;
} Held;

static PyObject *hold(Held *h, PyObject *o) {
    if (o != NULL && h->n < 48) h->refs[h->n++] = o;
    return o;
}

static void release(Held *h) {
    while (h->n > 0) Py_DECREF(h->refs[--h->n]);
}

/* An exact int equal to `want`: 1, 0 (another value or not an int), -1 never (overflow reads as unequal). */
static int int_is(PyObject *o, long long want) {
    if (!PyLong_CheckExact(o)) return 0;
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    return !overflow && v == want;
}

static inline void put32(unsigned char *out, int32_t v) {
    uint32_t u = (uint32_t)v;
    out[0] = u >> 24; out[1] = u >> 16; out[2] = u >> 8; out[3] = u;
}

/* ConsumerGroupHeartbeat v0/v1 (request header v2, response header v1, both flexible) with every
 * optional field null, answered as ConsumerMachine.steady_heartbeat would, else None (nothing changed). */
static PyObject *consumer_impl(HeartbeatPath *self, const unsigned char *frame, Py_ssize_t size,
                               PyObject *client_id, PyObject *client_host) {
    double started = monotonic_s();
    const unsigned char *end = frame + size, *pos = frame + 10;
    int version = be16(frame + 2);
    if (version < 0 || version > 1 || !PyUnicode_CheckExact(client_host)) Py_RETURN_NONE;
    int32_t correlation_id = be32(frame + 4);
    int16_t cid_len = be16(frame + 8);
    const unsigned char *cid = pos;
    if (cid_len < -1 || cid_len > end - pos) Py_RETURN_NONE;
    if (cid_len > 0) pos += cid_len;
    if (pos >= end || *pos++ != 0) Py_RETURN_NONE; /* the header's tag buffer: only an empty one here */
    const unsigned char *gid, *mid;
    Py_ssize_t gid_n, mid_n;
    if (string_field(&pos, end, 1, &gid, &gid_n) < 0 || gid_n < 0) Py_RETURN_NONE;
    if (string_field(&pos, end, 1, &mid, &mid_n) < 0 || mid_n < 0) Py_RETURN_NONE;
    if (end - pos < 4) Py_RETURN_NONE;
    int32_t epoch = be32(pos);
    pos += 4;
    /* InstanceId, RackId null; RebalanceTimeoutMs -1; SubscribedTopicNames, (v1) SubscribedTopicRegex,
     * ServerAssignor, TopicPartitions null; no tagged fields: 1 + 1 + 4 + 1 + v1 + 1 + 1 + 1 bytes */
    static const unsigned char steady_v0[] = {0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    static const unsigned char steady_v1[] = {0, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0};
    const unsigned char *rest = version == 0 ? steady_v0 : steady_v1;
    Py_ssize_t rest_n = version == 0 ? (Py_ssize_t)sizeof steady_v0 : (Py_ssize_t)sizeof steady_v1;
    if (end - pos != rest_n || memcmp(pos, rest, rest_n) != 0) Py_RETURN_NONE;
    if (epoch <= 0) Py_RETURN_NONE;

    Held h = {.n = 0};
    PyObject *new_client_id = NULL, *result = NULL, *o;
    if (cid_len < 0) {
        new_client_id = Py_NewRef(Py_None);
    } else {
        Py_ssize_t known_n;
        const char *known = PyUnicode_Check(client_id) ? PyUnicode_AsUTF8AndSize(client_id, &known_n) : NULL;
        if (known == NULL) PyErr_Clear();
        if (known != NULL && known_n == cid_len && memcmp(known, cid, cid_len) == 0) {
            new_client_id = Py_NewRef(client_id);
        } else {
            new_client_id = PyUnicode_DecodeUTF8((const char *)cid, cid_len, NULL);
            if (new_client_id == NULL) goto not_mine;
        }
    }
    PyObject *group_id = hold(&h, PyUnicode_DecodeUTF8((const char *)gid, gid_n, NULL));
    if (group_id == NULL) goto not_mine;
    PyObject *member_id = hold(&h, PyUnicode_DecodeUTF8((const char *)mid, mid_n, NULL));
    if (member_id == NULL) goto not_mine;

    /* the partition: ACTIVE, else the general path answers (loading, not ours) */
    long p = java_partition(group_id, self->partitions);
    if ((o = hold(&h, attr(self->coordinator, s_states))) == NULL) goto error;
    if (!PyList_Check(o) || p >= PyList_GET_SIZE(o) || PyList_GET_ITEM(o, p) != self->active) goto not_mine;
    if ((o = hold(&h, attr(self->coordinator, s_shards))) == NULL) goto error;
    if (!PyList_Check(o) || p >= PyList_GET_SIZE(o)) goto not_mine;
    PyObject *machine = hold(&h, attr(PyList_GET_ITEM(o, p), s_consumer));
    if (machine == NULL) goto error;

    /* steady_heartbeat's conditions, in its order */
    PyObject *groups = hold(&h, attr(machine, s_groups));
    if (groups == NULL) goto error;
    if (!PyDict_CheckExact(groups)) goto not_mine;
    PyObject *group = PyDict_GetItemWithError(groups, group_id);
    if (group == NULL) { if (PyErr_Occurred()) goto error; goto not_mine; }
    hold(&h, Py_NewRef(group));
    if (Py_TYPE(group) != self->consumer_group_type) goto not_mine;
    PyObject *members = hold(&h, attr(group, s_members));
    if (members == NULL) goto error;
    if (!PyDict_CheckExact(members)) goto not_mine;
    PyObject *member = PyDict_GetItemWithError(members, member_id);
    if (member == NULL) { if (PyErr_Occurred()) goto error; goto not_mine; }
    hold(&h, Py_NewRef(member));
    if ((o = hold(&h, attr(member, s_current))) == NULL) goto error;
    if (o == Py_None) goto not_mine;
    PyObject *assignment = hold(&h, attr(member, s_assignment));
    if (assignment == NULL) goto error;
    if ((o = hold(&h, attr(assignment, s_member_epoch))) == NULL) goto error;
    if (!int_is(o, epoch)) goto not_mine;
    if ((o = hold(&h, attr(assignment, s_state))) == NULL) goto error;
    if (o != self->stable) goto not_mine;
    /* group_epoch and assignment_epoch (ModernGroup's properties): 0 without their record, and epoch > 0 */
    if ((o = hold(&h, attr(group, s_metadata))) == NULL) goto error;
    if (o == Py_None || (o = hold(&h, attr(o, s_epoch))) == NULL || !int_is(o, epoch)) goto not_mine_or_error;
    if ((o = hold(&h, attr(group, s_target_epoch))) == NULL) goto error;
    if (o == Py_None || (o = hold(&h, attr(o, s_assignment_epoch))) == NULL || !int_is(o, epoch))
        goto not_mine_or_error;
    /* the image node.topics_image() returns, when it would not rebuild it (else the general path does) */
    PyObject *cached = hold(&h, attr(self->node, s_topics_image));
    if (cached == NULL) goto error;
    if (!PyTuple_CheckExact(cached) || PyTuple_GET_SIZE(cached) != 2) goto not_mine;
    PyObject *catalog = hold(&h, attr(self->node, s_catalog));
    if (catalog == NULL) goto error;
    if (PyTuple_GET_ITEM(cached, 0) != catalog) goto not_mine;
    PyObject *topics = PyTuple_GET_ITEM(cached, 1);
    PyObject *topics_version = hold(&h, attr(topics, s_version));
    if (topics_version == NULL) goto error;
    if ((o = hold(&h, attr(catalog, s_version))) == NULL) goto error;
    if (!PyLong_CheckExact(topics_version) || !PyLong_CheckExact(o)) goto not_mine;
    int same = PyObject_RichCompareBool(o, topics_version, Py_EQ);
    if (same != 1) goto not_mine_or_error;
    if ((o = hold(&h, attr(group, s_metadata_version))) == NULL) goto error;
    if (!PyLong_CheckExact(o) || (same = PyObject_RichCompareBool(o, topics_version, Py_EQ)) != 1)
        goto not_mine_or_error;
    if ((o = hold(&h, attr(group, s_subscribed_regexes))) == NULL) goto error;
    int regexes = PyObject_IsTrue(o);
    if (regexes != 0) goto not_mine_or_error;
    PyObject *metadata = hold(&h, attr(member, s_metadata));
    if (metadata == NULL) goto error;
    if (metadata == Py_None) goto not_mine;
    if ((o = hold(&h, attr(metadata, s_classic_member_metadata))) == NULL) goto error;
    if (o != Py_None) goto not_mine;
    /* the request's client id ("" when null) and host, as the member's metadata holds them */
    if ((o = hold(&h, attr(metadata, s_client_id))) == NULL) goto error;
    if (!PyUnicode_CheckExact(o)) goto not_mine;
    if (new_client_id == Py_None ? PyUnicode_GET_LENGTH(o) != 0 : PyUnicode_Compare(o, new_client_id) != 0)
        goto not_mine_or_error;
    if ((o = hold(&h, attr(metadata, s_client_host))) == NULL) goto error;
    if (!PyUnicode_CheckExact(o) || PyUnicode_Compare(o, client_host) != 0) goto not_mine_or_error;
    /* the broker's session timeout and interval: a group with overrides takes the general path */
    PyObject *settings = hold(&h, attr(machine, s_settings));
    if (settings == NULL) goto error;
    if ((o = hold(&h, attr(settings, s_group_configs))) == NULL) goto error;
    int overridden = PySequence_Contains(o, group_id);
    if (overridden != 0) goto not_mine_or_error;
    PyObject *timeout = hold(&h, attr(settings, s_session_timeout_ms));
    if (timeout == NULL) goto error;
    PyObject *interval = hold(&h, attr(settings, s_heartbeat_interval_ms));
    if (interval == NULL) goto error;
    if (!PyLong_CheckExact(timeout) || !PyLong_CheckExact(interval)) goto not_mine;
    long interval_ms = PyLong_AsLong(interval);
    if (interval_ms < INT32_MIN || interval_ms > INT32_MAX) goto not_mine_or_error;

    /* the deadline moves only later than the armed one (an earlier one re-arms the timer: general path) */
    PyObject *session = hold(&h, attr(machine, s_session));
    if (session == NULL) goto error;
    if (!PyDict_CheckExact(session)) goto not_mine;
    PyObject *key = hold(&h, PyTuple_Pack(2, group_id, member_id));
    if (key == NULL) goto error;
    PyObject *armed = PyDict_GetItemWithError(session, key);
    if (armed == NULL) { if (PyErr_Occurred()) goto error; goto not_mine; }
    hold(&h, Py_NewRef(armed));
    PyObject *now = hold(&h, PyLong_FromLongLong(monotonic_ms()));
    if (now == NULL) goto error;
    PyObject *deadline = hold(&h, PyNumber_Add(now, timeout));
    if (deadline == NULL) goto error;
    int earlier = PyObject_RichCompareBool(deadline, armed, Py_LT);
    if (earlier != 0) goto not_mine_or_error;

    /* the reply, built before any state changes so that a failed allocation changes nothing */
    Py_ssize_t id_len_n = 1;
    for (uint64_t v = (uint64_t)mid_n + 1; v >= 0x80; v >>= 7) id_len_n++;
    Py_ssize_t body_n = 4 + 2 + 1 + id_len_n + mid_n + 4 + 4 + 1 + 1, header_n = 4 + 4 + 1;
    PyObject *reply = hold(&h, PyBytes_FromStringAndSize(NULL, header_n + body_n));
    if (reply == NULL) goto error;
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(reply);
    put32(out, (int32_t)(header_n - 4 + body_n));
    put32(out + 4, correlation_id);
    out[8] = 0;                 /* response header tags */
    unsigned char *b = out + header_n;
    put32(b, 0);                /* ThrottleTimeMs */
    b[4] = 0; b[5] = 0;         /* ErrorCode */
    b[6] = 0;                   /* ErrorMessage: null */
    b += 7;
    for (uint64_t v = (uint64_t)mid_n + 1;; v >>= 7) { /* MemberId: compact string */
        if (v < 0x80) { *b++ = (unsigned char)v; break; }
        *b++ = (unsigned char)(v | 0x80);
    }
    memcpy(b, mid, mid_n);
    b += mid_n;
    put32(b, epoch);            /* MemberEpoch */
    put32(b + 4, (int32_t)interval_ms); /* HeartbeatIntervalMs */
    b[8] = 0xff;                /* Assignment: null */
    b[9] = 0;                   /* tags */

    /* the state steady_heartbeat changes: the session deadline, the machine's last topics image */
    if (PyDict_SetItem(session, key, deadline) < 0) goto error;
    if (PyObject_SetAttr(machine, s_topics, topics) < 0) goto error;
    if (count(self, self->consumer_key, self->consumer_buckets, self->consumer_api_key,
              monotonic_s() - started) < 0)
        goto error;
    result = PyTuple_Pack(2, reply, new_client_id);
    goto done;

not_mine_or_error:
    if (PyErr_Occurred()) goto error;
not_mine:
    PyErr_Clear(); /* a failed strict decode: the general path rejects that frame itself */
    result = Py_NewRef(Py_None);
    goto done;
error:
    result = NULL;
done:
    Py_XDECREF(new_client_id);
    release(&h);
    return result;
}

/* `frame` is the request without its size prefix; client_host is NULL when the caller has none. */
static PyObject *answer_frame_impl(HeartbeatPath *self, const unsigned char *frame, Py_ssize_t size,
                                   PyObject *client_id, PyObject *client_host) {
    if (size < 10) Py_RETURN_NONE;
    int api_key = be16(frame);
    if (api_key == HEARTBEAT) return classic_impl(self, frame, size, client_id);
    if (api_key == CONSUMER_HEARTBEAT && self->node != NULL && client_host != NULL)
        return consumer_impl(self, frame, size, client_id, client_host);
    Py_RETURN_NONE;
}

static PyObject *HeartbeatPath_answer(HeartbeatPath *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 && nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "answer(data, client_id, limit[, client_host])");
        return NULL;
    }
    PyObject *data = args[0];
    if (!PyBytes_Check(data)) Py_RETURN_NONE;
    long limit = PyLong_AsLong(args[2]);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t n = PyBytes_GET_SIZE(data);
    /* exactly one whole frame within the limit, as FrameReader.whole */
    if (n < 4) Py_RETURN_NONE;
    int32_t size = be32(buf);
    if (size < 0 || size != n - 4 || size > limit) Py_RETURN_NONE;
    return answer_frame_impl(self, buf + 4, size, args[1], nargs == 4 ? args[3] : NULL);
}

static PyObject *HeartbeatPath_answer_frame(HeartbeatPath *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 && nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "answer_frame(frame, client_id[, client_host])");
        return NULL;
    }
    if (!PyBytes_Check(args[0])) Py_RETURN_NONE;
    return answer_frame_impl(self, (const unsigned char *)PyBytes_AS_STRING(args[0]), PyBytes_GET_SIZE(args[0]),
                             args[1], nargs == 3 ? args[2] : NULL);
}

static int HeartbeatPath_init(HeartbeatPath *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"coordinator", "partitions", "active", "group_type", "empty", "preparing",
                             "bodies", "answered", "keys", "buckets", "seconds", "bounds", "consumer", NULL};
    PyObject *coordinator, *active, *group_type, *empty, *preparing, *bodies, *answered, *keys, *buckets,
        *seconds, *bounds, *consumer = Py_None;
    long partitions;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OlOO!OOO!O!O!O!O!O!|O", kwlist, &coordinator, &partitions,
                                     &active, &PyType_Type, &group_type, &empty, &preparing, &PyTuple_Type,
                                     &bodies, &PyDict_Type, &answered, &PyTuple_Type, &keys, &PyList_Type,
                                     &buckets, &PyDict_Type, &seconds, &PyTuple_Type, &bounds, &consumer))
        return -1;
    /* consumer: None (the classic Heartbeat only) or (node, ConsumerGroup, MemberState.STABLE, the
     * metrics key of a steady answer, RequestStats.buckets[68]) */
    PyObject *c_node = NULL, *c_type = NULL, *c_stable = NULL, *c_key = NULL, *c_buckets = NULL;
    if (consumer != Py_None) {
        if (!PyArg_ParseTuple(consumer, "OO!OOO!", &c_node, &PyType_Type, &c_type, &c_stable, &c_key, &PyList_Type,
                              &c_buckets))
            return -1;
        if (PyList_GET_SIZE(c_buckets) != PyTuple_GET_SIZE(bounds) + 1) {
            PyErr_SetString(PyExc_ValueError, "consumer buckets: one more than bounds");
            return -1;
        }
    }
    if (partitions <= 0) {
        PyErr_SetString(PyExc_ValueError, "partitions must be positive");
        return -1;
    }
    Py_ssize_t versions = PyTuple_GET_SIZE(bodies);
    if (versions < 1 || versions > MAX_VERSION + 1 || PyTuple_GET_SIZE(keys) != 2
        || PyTuple_GET_SIZE(bounds) > N_BUCKETS_MAX || PyList_GET_SIZE(buckets) != PyTuple_GET_SIZE(bounds) + 1) {
        PyErr_SetString(PyExc_ValueError, "bodies: one (none, rebalance) pair a version 0..4; keys: two; "
                                          "buckets: one more than bounds");
        return -1;
    }
    for (Py_ssize_t v = 0; v < versions; v++) {
        PyObject *pair = PyTuple_GET_ITEM(bodies, v);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyBytes_CheckExact(PyTuple_GET_ITEM(pair, 0))
            || !PyBytes_CheckExact(PyTuple_GET_ITEM(pair, 1))) {
            PyErr_SetString(PyExc_ValueError, "bodies: (bytes, bytes) per version");
            return -1;
        }
        for (int e = 0; e < 2; e++) Py_XSETREF(self->bodies[v][e], Py_NewRef(PyTuple_GET_ITEM(pair, e)));
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(bounds); i++) {
        double b = PyFloat_AsDouble(PyTuple_GET_ITEM(bounds, i));
        if (b == -1.0 && PyErr_Occurred()) return -1;
        self->bounds[i] = b;
    }
    self->n_bounds = PyTuple_GET_SIZE(bounds);
    self->max_version = (int)versions - 1;
    self->partitions = partitions;
    Py_XSETREF(self->coordinator, Py_NewRef(coordinator));
    Py_XSETREF(self->active, Py_NewRef(active));
    Py_XSETREF(self->group_type, (PyTypeObject *)Py_NewRef(group_type));
    Py_XSETREF(self->empty, Py_NewRef(empty));
    Py_XSETREF(self->preparing, Py_NewRef(preparing));
    Py_XSETREF(self->answered, Py_NewRef(answered));
    Py_XSETREF(self->keys[0], Py_NewRef(PyTuple_GET_ITEM(keys, 0)));
    Py_XSETREF(self->keys[1], Py_NewRef(PyTuple_GET_ITEM(keys, 1)));
    Py_XSETREF(self->buckets, Py_NewRef(buckets));
    Py_XSETREF(self->seconds, Py_NewRef(seconds));
    Py_XSETREF(self->api_key, PyLong_FromLong(HEARTBEAT));
    Py_XSETREF(self->node, Py_XNewRef(c_node));
    Py_XSETREF(self->consumer_group_type, (PyTypeObject *)Py_XNewRef(c_type));
    Py_XSETREF(self->stable, Py_XNewRef(c_stable));
    Py_XSETREF(self->consumer_key, Py_XNewRef(c_key));
    Py_XSETREF(self->consumer_buckets, Py_XNewRef(c_buckets));
    Py_XSETREF(self->consumer_api_key, c_node != NULL ? PyLong_FromLong(CONSUMER_HEARTBEAT) : NULL);
    if (c_node != NULL && self->consumer_api_key == NULL) return -1;
    return 0;
}

static int HeartbeatPath_traverse(HeartbeatPath *self, visitproc visit, void *arg) {
    Py_VISIT(self->coordinator);
    Py_VISIT(self->active);
    Py_VISIT(self->group_type);
    Py_VISIT(self->empty);
    Py_VISIT(self->preparing);
    Py_VISIT(self->answered);
    Py_VISIT(self->keys[0]);
    Py_VISIT(self->keys[1]);
    Py_VISIT(self->buckets);
    Py_VISIT(self->seconds);
    Py_VISIT(self->node);
    Py_VISIT(self->consumer_group_type);
    Py_VISIT(self->stable);
    Py_VISIT(self->consumer_key);
    Py_VISIT(self->consumer_buckets);
    return 0;
}

static int HeartbeatPath_clear(HeartbeatPath *self) {
    Py_CLEAR(self->coordinator);
    Py_CLEAR(self->active);
    Py_CLEAR(self->group_type);
    Py_CLEAR(self->empty);
    Py_CLEAR(self->preparing);
    Py_CLEAR(self->answered);
    Py_CLEAR(self->keys[0]);
    Py_CLEAR(self->keys[1]);
    Py_CLEAR(self->buckets);
    Py_CLEAR(self->seconds);
    Py_CLEAR(self->api_key);
    Py_CLEAR(self->node);
    Py_CLEAR(self->consumer_group_type);
    Py_CLEAR(self->stable);
    Py_CLEAR(self->consumer_key);
    Py_CLEAR(self->consumer_buckets);
    Py_CLEAR(self->consumer_api_key);
    for (int v = 0; v <= MAX_VERSION; v++)
        for (int e = 0; e < 2; e++) Py_CLEAR(self->bodies[v][e]);
    return 0;
}

static void HeartbeatPath_dealloc(HeartbeatPath *self) {
    PyObject_GC_UnTrack(self);
    HeartbeatPath_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef HeartbeatPath_methods[] = {
    {"answer", (PyCFunction)(void (*)(void))HeartbeatPath_answer, METH_FASTCALL,
     "answer(data, client_id, limit[, client_host]): (reply, client_id) for one whole steady Heartbeat or "
     "(with client_host) ConsumerGroupHeartbeat frame, else None"},
    {"answer_frame", (PyCFunction)(void (*)(void))HeartbeatPath_answer_frame, METH_FASTCALL,
     "answer_frame(frame, client_id[, client_host]): the same for a frame without its size prefix"},
    {NULL}};

static PyTypeObject HeartbeatPathType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "groupd.coordinator.server._native.HeartbeatPath",
    .tp_basicsize = sizeof(HeartbeatPath),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)HeartbeatPath_init,
    .tp_dealloc = (destructor)HeartbeatPath_dealloc,
    .tp_traverse = (traverseproc)HeartbeatPath_traverse,
    .tp_clear = (inquiry)HeartbeatPath_clear,
    .tp_methods = HeartbeatPath_methods,
    .tp_doc = "The steady classic Heartbeat answered from the frame (see the module's source comment).",
};

static PyObject *native_java_partition(PyObject *module, PyObject *args) {
    PyObject *s;
    long partitions;
    if (!PyArg_ParseTuple(args, "Ul", &s, &partitions)) return NULL;
    if (partitions <= 0) {
        PyErr_SetString(PyExc_ValueError, "partitions must be positive");
        return NULL;
    }
    return PyLong_FromLong(java_partition(s, partitions));
}

static PyMethodDef module_methods[] = {
    {"java_partition", native_java_partition, METH_VARARGS,
     "java_partition(group_id, partitions): the partition the native path computes (tests compare it)"},
    {NULL}};

static struct PyModuleDef native_module = {PyModuleDef_HEAD_INIT, "_native",
                                           "groupd's native fast paths (coordinator/server/_native.c)", -1,
                                           module_methods};

PyMODINIT_FUNC PyInit__native(void) {
#define INTERN(var, name) if ((var = PyUnicode_InternFromString(name)) == NULL) return NULL;
    INTERN(s_states, "states")
    INTERN(s_shards, "shards")
    INTERN(s_events, "events")
    INTERN(s_groups, "groups")
    INTERN(s_members, "members")
    INTERN(s_generation, "generation")
    INTERN(s_state, "state")
    INTERN(s_session_timeout_ms, "session_timeout_ms")
    INTERN(s_deadline, "deadline")
    INTERN(s_consumer, "consumer")
    INTERN(s_current, "current")
    INTERN(s_assignment, "assignment")
    INTERN(s_member_epoch, "member_epoch")
    INTERN(s_metadata, "metadata")
    INTERN(s_epoch, "epoch")
    INTERN(s_target_epoch, "target_epoch")
    INTERN(s_assignment_epoch, "assignment_epoch")
    INTERN(s_metadata_version, "metadata_version")
    INTERN(s_subscribed_regexes, "subscribed_regexes")
    INTERN(s_classic_member_metadata, "classic_member_metadata")
    INTERN(s_client_id, "client_id")
    INTERN(s_client_host, "client_host")
    INTERN(s_settings, "settings")
    INTERN(s_group_configs, "group_configs")
    INTERN(s_heartbeat_interval_ms, "heartbeat_interval_ms")
    INTERN(s_session, "session")
    INTERN(s_topics, "topics")
    INTERN(s_topics_image, "_topics_image")
    INTERN(s_catalog, "catalog")
    INTERN(s_version, "version")
#undef INTERN
    if ((one = PyLong_FromLong(1)) == NULL) return NULL;
    if (PyType_Ready(&HeartbeatPathType) < 0) return NULL;
    PyObject *m = PyModule_Create(&native_module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "HeartbeatPath", (PyObject *)&HeartbeatPathType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
