package io.statusstore.agent.path;

/**
 * Why the path leaves the sidecar: the kind of reason, one of a few, and the words the switch's line gives. The
 * line comes at most once a minute per kind (never per key or per text), its repeats counted.
 */
final class Leaving {
    /** The kinds of reason, as docs/operations.md lists them under the switch's line. */
    enum Kind {
        /** A refused connection, no answer within a request's deadline, a 503. */
        AWAY,
        /** An answer that waiting will not change (a bad token, no agent route). */
        REFUSES,
        /** An answer the agent could not check. */
        NOT_BELIEVED,
        /** A write the sidecar said it made that the worker's own store has not read back (rule 4). */
        NOT_READ_BACK,
        /** Writes without an outcome past their bound while the worker's own producer wrote (rule 5). */
        NO_OUTCOME,
        /** The agent's table is full (max.keys). */
        TABLE_FULL,
        /** A step of the sender threw (rule 7). */
        STEP_FAILED,
        /** The sender's thread ends (rule 7). */
        SENDER_ENDS,
        /** The worker's status store stops. */
        STOPS,
        /** Connect's own path did not go quiet in time. */
        NOT_QUIET
    }

    final Kind kind;
    final String why;

    Leaving(Kind kind, String why) {
        this.kind = kind;
        this.why = why;
    }
}
