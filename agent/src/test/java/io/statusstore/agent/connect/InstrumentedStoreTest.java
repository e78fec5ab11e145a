package io.statusstore.agent.connect;

import net.bytebuddy.agent.ByteBuddyAgent;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import java.lang.instrument.ClassFileTransformer;
import java.lang.instrument.Instrumentation;

/**
 * A test class that runs against Connect's real KafkaStatusBackingStore with the agent's interception installed in
 * this JVM (through ByteBuddy's agent), as a worker started with the agent has it; removed, and the hooks disarmed,
 * after the class.
 */
abstract class InstrumentedStoreTest {
    private static Instrumentation instrumentation;
    private static ClassFileTransformer transformer;

    @BeforeAll
    static void instrument() {
        instrumentation = ByteBuddyAgent.install();
        transformer = StoreInterception.install(instrumentation);
    }

    @AfterAll
    static void uninstall() {
        instrumentation.removeTransformer(transformer);
        StoreHooks.disarm();
    }
}
