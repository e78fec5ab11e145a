package io.statusstore.agent.jmx;

import javax.management.Attribute;
import javax.management.AttributeList;
import javax.management.AttributeNotFoundException;
import javax.management.DynamicMBean;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanInfo;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.DoubleSupplier;
import java.util.regex.Pattern;

/**
 * The agent's MBeans in the worker's platform MBean server, named as Connect's own metrics are
 * ({@code kafka.connect:type=<group>,client-id=<id>}, values as doubles like Kafka's JmxReporter):
 * <ul>
 *   <li>{@code kafka.connect:type=status-backing-store-metrics,client-id=<store client id>}: KIP-1278's group,
 *       {@code status-update-retry-total}, {@code status-update-failure-total}, {@code status-update-success-total};
 *   <li>{@code kafka.connect:type=status-store-agent-metrics,client-id=<store client id>}: the agent's own figures.
 * </ul>
 * The client id is the status store's own ({@code <group>-statuses}), the one its producer's MBeans carry.
 */
public final class MetricsMBeans {
    public static final String DOMAIN = "kafka.connect";
    public static final String KIP_1278_GROUP = "status-backing-store-metrics";
    public static final String AGENT_GROUP = "status-store-agent-metrics";
    private static final Pattern NEEDS_QUOTING = Pattern.compile("[,=:\"*?\\s]");

    private MetricsMBeans() {
    }

    /** Registers both MBeans (replacing any left by an earlier store of this JVM) and returns their names. */
    public static List<ObjectName> register(AgentMetrics m, String clientId) throws Exception {
        Map<String, DoubleSupplier> kip = new LinkedHashMap<>();
        kip.put("status-update-retry-total", m::retryTotal);
        kip.put("status-update-failure-total", m::failureTotal);
        kip.put("status-update-success-total", m::successTotal);
        Map<String, DoubleSupplier> own = new LinkedHashMap<>();
        own.put("handed-over-total", m::handedOverTotal);
        own.put("fallen-back-total", m::fallenBackTotal);
        own.put("refused-total", m::refusedTotal);
        own.put("dropped-total", m::droppedTotal);
        own.put("overtaken-total", m::overtakenTotal);
        own.put("undone-total", m::undoneTotal);
        own.put("path-switches-total", m::switchesTotal);
        own.put("queued-keys", m::queuedKeys);
        own.put("on-sidecar-path", () -> m.onSidecar() ? 1 : 0);
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        List<ObjectName> names = new ArrayList<>();
        names.add(register(server, name(KIP_1278_GROUP, clientId), new Counters(kip,
                "KIP-1278 status update counters of this worker's writes, from the outcomes the sidecar reports")));
        names.add(register(server, name(AGENT_GROUP, clientId), new Counters(own,
                "The status-store agent's own figures")));
        return names;
    }

    public static ObjectName name(String group, String clientId) throws Exception {
        String id = NEEDS_QUOTING.matcher(clientId).find() ? ObjectName.quote(clientId) : clientId;
        return new ObjectName(DOMAIN + ":type=" + group + ",client-id=" + id);
    }

    private static ObjectName register(MBeanServer server, ObjectName name, Counters bean) throws Exception {
        if (server.isRegistered(name)) {
            server.unregisterMBean(name);
        }
        server.registerMBean(bean, name);
        return name;
    }

    /** A read-only MBean of named counters. */
    private static final class Counters implements DynamicMBean {
        private final Map<String, DoubleSupplier> values;
        private final MBeanInfo info;

        Counters(Map<String, DoubleSupplier> values, String description) {
            this.values = values;
            List<MBeanAttributeInfo> attributes = new ArrayList<>();
            for (String name : values.keySet()) {
                attributes.add(new MBeanAttributeInfo(name, "double", name, true, false, false));
            }
            this.info = new MBeanInfo(Counters.class.getName(), description,
                    attributes.toArray(new MBeanAttributeInfo[0]), null, null, null);
        }

        @Override
        public Object getAttribute(String attribute) throws AttributeNotFoundException {
            DoubleSupplier value = values.get(attribute);
            if (value == null) {
                throw new AttributeNotFoundException(attribute);
            }
            return value.getAsDouble();
        }

        @Override
        public AttributeList getAttributes(String[] attributes) {
            AttributeList list = new AttributeList();
            for (String name : attributes) {
                DoubleSupplier value = values.get(name);
                if (value != null) {
                    list.add(new Attribute(name, value.getAsDouble()));
                }
            }
            return list;
        }

        @Override
        public void setAttribute(Attribute attribute) {
            throw new UnsupportedOperationException("read-only");
        }

        @Override
        public AttributeList setAttributes(AttributeList attributes) {
            return new AttributeList();
        }

        @Override
        public Object invoke(String actionName, Object[] params, String[] signature) {
            throw new UnsupportedOperationException("no operations");
        }

        @Override
        public MBeanInfo getMBeanInfo() {
            return info;
        }
    }
}
