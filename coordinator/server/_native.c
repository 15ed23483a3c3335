/* The steady classic Heartbeat in one call: frame in, reply bytes out (coordinator/server/fast_heartbeat.py).
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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define HEARTBEAT 12
#define MAX_VERSION 4
#define N_BUCKETS_MAX 64

static PyObject *s_states, *s_shards, *s_events, *s_groups, *s_members, *s_generation, *s_state,
    *s_session_timeout_ms, *s_deadline, *one;

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

static int count(HeartbeatPath *self, int rebalance, double seconds) {
    PyObject *key = self->keys[rebalance];
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
    PyObject *b = PyList_GetItem(self->buckets, lo);
    if (b == NULL) return -1;
    PyObject *nb = PyNumber_Add(b, one);
    if (nb == NULL) return -1;
    PyList_SetItem(self->buckets, lo, nb); /* steals nb */
    PyObject *total = PyDict_GetItemWithError(self->seconds, self->api_key);
    if (total == NULL) return PyErr_Occurred() ? -1 : 0;
    PyObject *sum = PyFloat_FromDouble(PyFloat_AsDouble(total) + seconds);
    if (sum == NULL || PyDict_SetItem(self->seconds, self->api_key, sum) < 0) { Py_XDECREF(sum); return -1; }
    Py_DECREF(sum);
    return 0;
}

/* The heart of both entry points: `frame` is the request without its size prefix. Returns a new
 * (reply, client id) tuple, Py_None (new reference) for "not mine", or NULL with an exception. */
static PyObject *answer_frame_impl(HeartbeatPath *self, const unsigned char *frame, Py_ssize_t size,
                                   PyObject *client_id) {
    double started = monotonic_s();
    const unsigned char *end = frame + size, *pos = frame + 10;
    if (size < 10 || be16(frame) != HEARTBEAT) Py_RETURN_NONE;
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
    if (count(self, rebalance, monotonic_s() - started) < 0) { Py_DECREF(reply); goto error; }
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

static PyObject *HeartbeatPath_answer(HeartbeatPath *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "answer(data, client_id, limit)");
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
    return answer_frame_impl(self, buf + 4, size, args[1]);
}

static PyObject *HeartbeatPath_answer_frame(HeartbeatPath *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "answer_frame(frame, client_id)");
        return NULL;
    }
    if (!PyBytes_Check(args[0])) Py_RETURN_NONE;
    return answer_frame_impl(self, (const unsigned char *)PyBytes_AS_STRING(args[0]), PyBytes_GET_SIZE(args[0]),
                             args[1]);
}

static int HeartbeatPath_init(HeartbeatPath *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"coordinator", "partitions", "active", "group_type", "empty", "preparing",
                             "bodies", "answered", "keys", "buckets", "seconds", "bounds", NULL};
    PyObject *coordinator, *active, *group_type, *empty, *preparing, *bodies, *answered, *keys, *buckets,
        *seconds, *bounds;
    long partitions;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OlOO!OOO!O!O!O!O!O!", kwlist, &coordinator, &partitions,
                                     &active, &PyType_Type, &group_type, &empty, &preparing, &PyTuple_Type,
                                     &bodies, &PyDict_Type, &answered, &PyTuple_Type, &keys, &PyList_Type,
                                     &buckets, &PyDict_Type, &seconds, &PyTuple_Type, &bounds))
        return -1;
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
     "answer(data, client_id, limit): (reply, client_id) for one whole steady Heartbeat frame, else None"},
    {"answer_frame", (PyCFunction)(void (*)(void))HeartbeatPath_answer_frame, METH_FASTCALL,
     "answer_frame(frame, client_id): the same for a frame without its size prefix"},
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
