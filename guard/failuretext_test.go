package guard

import "testing"

func TestFailureText(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"cline array", `[{"query":"ls","result":"a.txt","success":true},{"query":"cat config/settings.json","result":"[Command exited with code 1]\n\n[stderr]\ncat: config/settings.json: No such file or directory\n","error":"Command exited with code 1","success":false}]`,
			"cat config/settings.json\nCommand exited with code 1\n[Command exited with code 1]\n\n[stderr]\ncat: config/settings.json: No such file or directory"},
		{"object with an error", `{"error":"permission denied","exit_code":1}`, "permission denied"},
		{"object that says nothing", `{"output":"Traceback (most recent call last):"}`, `{"output":"Traceback (most recent call last):"}`},
		{"text", "Exit code 1\nboom", "Exit code 1\nboom"},
		{"not JSON", "[ERROR] build failed", "[ERROR] build failed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := FailureText(tc.in); got != tc.want {
				t.Errorf("FailureText = %q, want %q", got, tc.want)
			}
		})
	}
}
