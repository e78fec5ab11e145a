package statusstore.tools;

import java.util.Set;
import javax.management.MBeanAttributeInfo;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

/**
 * Prints every attribute of the MBeans a pattern names, as a JMX exporter would read them from a running JVM:
 * one line each, {@code <object name>\t<attribute>\t<value>}.
 *
 * <pre>java statusstore.tools.JmxQuery 127.0.0.1:9999 'kafka.connect:type=status-backing-store-metrics,*'</pre>
 */
public final class JmxQuery {
    private JmxQuery() {
    }

    public static void main(String[] args) throws Exception {
        JMXServiceURL url = new JMXServiceURL("service:jmx:rmi:///jndi/rmi://" + args[0] + "/jmxrmi");
        try (JMXConnector connector = JMXConnectorFactory.connect(url)) {
            MBeanServerConnection server = connector.getMBeanServerConnection();
            Set<ObjectName> names = server.queryNames(new ObjectName(args[1]), null);
            for (ObjectName name : names) {
                for (MBeanAttributeInfo attribute : server.getMBeanInfo(name).getAttributes()) {
                    System.out.println(name + "\t" + attribute.getName() + "\t" + server.getAttribute(name,
                            attribute.getName()));
                }
            }
        }
    }
}
