// Package units formats quantities for people: the byte sizes a delete
// preview and an image pull's progress show.
package units

import "fmt"

// Bytes formats n in binary units with one decimal: "512 B", "3.0 MiB".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
