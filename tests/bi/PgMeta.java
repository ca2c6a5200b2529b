// pgjdbc's DatabaseMetaData against Shoal's PostgreSQL endpoint (run by tests/bi/test_bi_catalog.py):
//   java -cp /usr/share/java/postgresql.jar PgMeta.java URL USER PASSWORD SCHEMA TABLE QUERY
// Prints one line per fact ("kind|a|b|..."), so the test can compare what the driver saw.
import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.Statement;
import java.util.Properties;

public class PgMeta {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.setProperty("user", args[1]);
        props.setProperty("password", args[2]);
        String schema = args[3], table = args[4], query = args[5];
        try (Connection conn = DriverManager.getConnection(args[0], props)) {
            DatabaseMetaData md = conn.getMetaData();
            System.out.println("product|" + md.getDatabaseProductName() + "|" + md.getDatabaseProductVersion());
            try (ResultSet rs = md.getSchemas()) {
                while (rs.next()) System.out.println("schema|" + rs.getString("TABLE_SCHEM"));
            }
            try (ResultSet rs = md.getTables(null, schema, "%", new String[] {"TABLE", "VIEW"})) {
                while (rs.next()) {
                    System.out.println("table|" + rs.getString("TABLE_SCHEM") + "|" + rs.getString("TABLE_NAME")
                            + "|" + rs.getString("TABLE_TYPE"));
                }
            }
            try (ResultSet rs = md.getColumns(null, schema, table, "%")) {
                while (rs.next()) {
                    System.out.println("column|" + rs.getString("TABLE_NAME") + "|" + rs.getString("COLUMN_NAME")
                            + "|" + rs.getInt("DATA_TYPE") + "|" + rs.getString("TYPE_NAME") + "|"
                            + rs.getInt("ORDINAL_POSITION"));
                }
            }
            try (ResultSet rs = md.getPrimaryKeys(null, schema, table)) {
                while (rs.next()) System.out.println("pk|" + rs.getString("COLUMN_NAME"));
            }
            // Foreign keys: Iceberg tables have none; pgjdbc's queries must answer (empty), not fail.
            try (ResultSet rs = md.getImportedKeys(null, schema, table)) {
                while (rs.next()) System.out.println("fk|imported|" + rs.getString("FKCOLUMN_NAME"));
            }
            try (ResultSet rs = md.getExportedKeys(null, schema, table)) {
                while (rs.next()) System.out.println("fk|exported|" + rs.getString("FKCOLUMN_NAME"));
            }
            try (ResultSet rs = md.getCrossReference(null, schema, table, null, schema, table)) {
                while (rs.next()) System.out.println("fk|cross|" + rs.getString("FKCOLUMN_NAME"));
            }
            System.out.println("fk|done");
            int types = 0;
            try (ResultSet rs = md.getTypeInfo()) {
                while (rs.next()) {
                    types++;
                    System.out.println("type|" + rs.getString("TYPE_NAME"));
                }
            }
            System.out.println("typeinfo|" + types);
            try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery(query)) {
                ResultSetMetaData rmd = rs.getMetaData();
                while (rs.next()) {
                    StringBuilder line = new StringBuilder("row");
                    for (int i = 1; i <= rmd.getColumnCount(); i++) line.append('|').append(rs.getString(i));
                    System.out.println(line);
                }
            }
        }
    }
}
